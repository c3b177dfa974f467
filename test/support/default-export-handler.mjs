// A handler module whose handler is its default export.
export default ({ shard }) => ({ shard, by: 'default' });
