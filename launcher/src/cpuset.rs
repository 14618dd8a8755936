//! cpuset placement (owned by the cpuset work)
