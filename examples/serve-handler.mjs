// A handler module for the `serve` section of a `shardherd node` config (plain JavaScript, so node
// processes load it whether they run built or through tsx): `npm run cluster`'s nodes serve the
// dataset `metrics` with it, and the router example asks them. It answers which node and shard
// served the request, and for which metric.
export function createHandler({ node }) {
  return ({ shard, payload }) => {
    if (typeof payload?.metric !== 'string' || payload.metric === '') throw new Error('a query needs a metric');
    return { node, shard, metric: payload.metric };
  };
}
