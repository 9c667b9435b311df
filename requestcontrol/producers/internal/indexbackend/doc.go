// Package indexbackend holds what the prefix producers share to choose
// where their index lives: the indexBackend and redis parameters, their
// defaults and checks, and the kvindex/redisindex configuration built from
// them.
package indexbackend
