// The views of one membership handle: the current one, and each new one told to every listener,
// in generation order.
import type { Logger } from 'pino';
import type { Member } from '../../core/shard-manager/protocol.js';
import type { MembershipView } from '../membership.js';

const EMPTY_VIEW: MembershipView = Object.freeze({ generation: 0, members: Object.freeze([]) });

/** Numbers views and delivers them; a listener that throws is logged and the others still hear the view. */
export class ViewAnnouncer {
  private current: MembershipView = EMPTY_VIEW;
  private listeners: ((view: MembershipView) => void)[] = [];
  private readonly outbox: MembershipView[] = [];
  private delivering = false;

  /** `log` is asked at each use: the handle's logger gains the node's fields when it joins. */
  constructor(private readonly log: () => Logger) {}

  get view(): MembershipView {
    return this.current;
  }

  onChange(listener: (view: MembershipView) => void): () => void {
    const wrapped = (view: MembershipView): void => listener(view);
    this.listeners.push(wrapped);
    return () => {
      this.listeners = this.listeners.filter((l) => l !== wrapped);
    };
  }

  forgetListeners(): void {
    this.listeners = [];
  }

  /**
   * Makes `members` the current view and tells every listener. A view made by a listener (one that
   * calls `leave`, say) is queued until the current one reached every listener, so each listener
   * hears views in generation order.
   */
  announce(members: readonly Member[]): MembershipView {
    const view: MembershipView = Object.freeze({ generation: this.current.generation + 1, members: Object.freeze([...members]) });
    this.current = view;
    this.log().debug(
      { event: 'membership.view', generation: view.generation, members: view.members.map((m) => `${m.node}@${m.incarnation}`) },
      'membership view',
    );
    this.outbox.push(view);
    if (this.delivering) return view;
    this.delivering = true;
    try {
      for (let next = this.outbox.shift(); next; next = this.outbox.shift()) {
        for (const listener of this.listeners.slice()) {
          try {
            listener(next);
          } catch (e) {
            this.log().error({ err: e, generation: next.generation }, 'a membership listener threw');
          }
        }
      }
    } finally {
      this.delivering = false;
    }
    return view;
  }
}
