// A module that exports no handler: a node config naming it is refused.
export const handle = 42;
