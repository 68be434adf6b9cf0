"""The end-to-end experiment (`kvds e2e`): a real serving-trace slice executed on this kernel through every track at
once, {LRU, kvds's policy} x {no intents, intent mapping}, with other tenants on the same memory and device."""
