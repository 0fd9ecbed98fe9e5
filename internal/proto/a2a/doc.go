// Package a2a is the Agent2Agent (A2A) adapter: every agent registered on
// the hub, whatever endpoint it registered (ATP webhook, MAMP, pull, a
// remote A2A agent), is served as an A2A agent, in A2A 1.0 and 0.3.
//
// The bindings are the official Go SDK's (a2a-go v2): Server implements
// a2asrv.RequestHandler over the relay and mounts a2asrv's JSON-RPC and
// HTTP+JSON handlers, a2agrpc's gRPC service (on the hub's own port) and
// the 0.3 handlers of a2acompat/a2av0, with thin wraps where the SDK
// falls short (jsonrpc.go, http.go, grpc.go; docs/a2a.md lists each and
// why). Cards are in card.go.
//
// The relay stays the store of record and the judge: a task is a record
// (KindTask) whose messages are relay messages sent as the caller (its
// agent, or for a caller without one the task's hidden reply path), and
// every operation goes through the relay's principal-taking operations.
// Relay errors become A2A errors by their kind in one place (wireError).
//
// Tasks move on their own (follow.go): one goroutine per Server follows
// the relayed messages of open tasks, applies receipts and results
// (reconcile.go), and push notifications go out as relay messages to
// hidden push agents (push.go) that the hub's webhook deliverer posts.
// Finished tasks are deleted after the retention (retire.go).
//
// Remote A2A agents (their cards, registration and the deliverer that
// sends to them) are in the subpackage remote.
package a2a
