// The API's routes as paths and methods, kept beside Fastify's router for the answers its router
// cannot give: which methods a known path takes (a request with another method is a 405 naming
// them, not a 404), and whether a path belongs to a route that changes the cluster (its token is
// checked before anything about the request is refused, even a path the router cannot read).
import type { FastifyInstance, RouteOptions } from 'fastify';

interface KnownRoute {
  readonly path: RegExp;
  readonly method: string;
  readonly mutates: boolean;
}

/**
 * A route's URL (`/api/v1/datasets/:dataset`) as a pattern of concrete, still percent-encoded
 * paths. A parameter may be empty: Fastify's router routes `/api/v1/datasets/` to that route too.
 */
function pathPattern(url: string): RegExp {
  const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const segments = url.split('/').map((segment) => (segment.startsWith(':') ? '[^/]*' : segment === '*' ? '.*' : literal(segment)));
  return new RegExp(`^${segments.join('/')}$`);
}

export class RouteTable {
  private readonly routes: KnownRoute[] = [];

  /** Records every route `app` declares from now on (Fastify's HEAD twins of GET routes too). */
  follow(app: FastifyInstance): void {
    app.addHook('onRoute', (route) => this.add(route));
  }

  /** The methods declared at a concrete path (query string ignored), sorted; empty for an unknown path. */
  methodsAt(url: string): string[] {
    const path = url.split('?')[0]!;
    return [...new Set(this.routes.filter((r) => r.path.test(path)).map((r) => r.method))].sort();
  }

  /** Whether the route of this method at this concrete path changes the cluster. */
  mutates(method: string, url: string): boolean {
    const path = url.split('?')[0]!;
    return this.routes.some((r) => r.mutates && r.method === method && r.path.test(path));
  }

  private add(route: RouteOptions): void {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const mutates = route.config?.mutates === true;
    for (const method of methods) this.routes.push({ path: pathPattern(route.url), method: method.toUpperCase(), mutates });
  }
}
