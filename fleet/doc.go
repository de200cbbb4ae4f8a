// Package fleet makes several sipedge nodes sharing one Redis (or Redis
// Cluster) one fleet: node membership, fleet-wide channel limits, shared
// runtime state, decision-cache drops and a call journal.
package fleet
