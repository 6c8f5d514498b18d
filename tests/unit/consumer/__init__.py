"""kproto.consumer top-level modules: config, subscription state, the rebalance-listener invoker."""
