// The target whose precompiled header every kvnode target reuses (KVNODE_PCH).
