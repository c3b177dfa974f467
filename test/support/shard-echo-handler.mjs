// A handler module for `serve` in a node config (plain JavaScript: node processes run it built or
// through tsx alike). It answers which node and shard served the request, and the payload back.
export function createHandler({ node }) {
  return ({ shard, payload }) => ({ node, shard, payload });
}
