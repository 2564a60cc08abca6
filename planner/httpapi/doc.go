// Package httpapi serves the leading planner's view of the cluster as a
// read-only JSON API under /v1/ and Prometheus metrics at /metrics
// (docs/api.md).
//
// The planner publishes an immutable planner.View at the end of every round
// (planner.Config.OnRound = Server.Publish); the server turns it into the
// endpoints' documents once, and bumps its index when they change. Every
// /v1/ response carries the index in the X-Themis-Index header, and a
// request with ?index=N blocks, as Nomad's blocking queries do, until the
// index exceeds N or ?wait= passes. Only the leader serves the view: a
// standby answers 503 naming the planner that leads.
package httpapi
