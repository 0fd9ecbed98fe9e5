// Package a2a is the Agent2Agent (A2A) adapter: every agent registered on
// the hub, whatever endpoint it registered (ATP webhook, MAMP, pull, a
// remote A2A agent), is served as an A2A agent.
//
// # Routes
//
//   - GET /.well-known/agent-card.json (and agent.json): the hub's card, a
//     directory of its agents ("agents": id, name, url, cardUrl; one skill
//     per agent). The hub itself takes no messages.
//   - GET /a2a/agents: the same directory.
//   - GET /a2a/{agent}/.well-known/agent-card.json: the agent's card, in
//     the 1.0 shape (supportedInterfaces lists JSON-RPC 1.0 and 0.3 at the
//     same URL) plus the 0.3 fields (url, preferredTransport,
//     protocolVersion, capabilities.stateTransitionHistory).
//   - GET /a2a/{agent}/.well-known/agent.json: the agent's pure 0.3 card.
//   - POST /a2a/{agent}: the JSON-RPC 2.0 endpoint (batches answered per
//     JSON-RPC 2.0; streaming methods cannot be batched).
//
// # Versions
//
// The version is chosen per request by the A2A-Version header: "1.0" (any
// 1.x) speaks 1.0, "0.3" (any 0.3.x) or no header speaks 0.3, anything else
// is answered -32009 (version not supported). Without a header a 1.0
// method name, which cannot be mistaken for a 0.3 one, is served as 1.0.
//
//	1.0 method                         0.3 method
//	SendMessage                        message/send
//	SendStreamingMessage               message/stream
//	GetTask                            tasks/get
//	ListTasks                          (none)
//	CancelTask                         tasks/cancel
//	SubscribeToTask                    tasks/resubscribe
//	CreateTaskPushNotificationConfig   tasks/pushNotificationConfig/set
//	GetTaskPushNotificationConfig      tasks/pushNotificationConfig/get
//	ListTaskPushNotificationConfigs    tasks/pushNotificationConfig/list
//	DeleteTaskPushNotificationConfig   tasks/pushNotificationConfig/delete
//	GetExtendedAgentCard               agent/getAuthenticatedExtendedCard (-32007)
//
// 1.0 uses TASK_STATE_* and ROLE_* enums, parts without "kind" ({text},
// {raw}, {url}, {data}) and wraps results and events as {"task": …},
// {"statusUpdate": …}, {"artifactUpdate": …}; 0.3 uses "completed",
// "user", parts with "kind" and objects with "kind" ("task",
// "status-update" with "final", "artifact-update").
//
// # Tasks and the relay
//
// A message to agent X creates a task (state submitted, kept as a store
// record of kind "a2a_task", Index = context id) and becomes a relay message
// to X: Protocol "a2a", ConversationID = the context id, canonical parts,
// and metadata a2a_task_id, a2a_context_id and a2a_message_id (plus the A2A
// message's own metadata). A message with a taskId continues that task
// (an input-required task goes back to submitted). The relay delivers it
// through X's endpoint; the task then follows what happens:
//
//   - receipt delivered, Reply {"status":"accepted","result":P} (an ATP
//     worker's answer): completed, with P (ATP payload rules) as an artifact
//     named "result" and as the status message;
//   - Reply {"status":"accepted"} or no Reply: working, until a result;
//   - Reply "status" naming a task state (input-required, failed, …): that
//     state, with P as the status message;
//   - Reply {"task": T} or {"message": M} (a remote A2A agent's answer,
//     see deliver/a2aremote): T's state, artifacts and status message, or
//     completed with M;
//   - receipt rejected: rejected; timeout or expired: failed;
//   - a result message (CorrelationID = the relayed message id): completed
//     with its parts as an artifact, or the state in its metadata
//     "a2a_state" (failed when its type is "error").
//
// One goroutine per Server moves open tasks along with no client asking
// (notified by the relay, checking now and then); each followed message
// is marked by a record of kind "a2a_follow", written before the message
// is sent and deleted when following ends, and a Server started with
// Options.Context adopts the marks it finds, so tasks a stopped hub left
// open move on after a restart.
//
// Illegal state transitions are refused (CanTransition): terminal states
// (completed, failed, canceled, rejected) are final. Canceling a terminal
// task is -32002; the agent is not told of a cancel.
//
// SendMessage waits (at most Options.BlockTimeout) for a terminal or
// interrupted state unless configuration.returnImmediately (1.0) or
// blocking:false (0.3). Streams start with the Task, then send an
// artifact-update per new artifact and a status-update per status change,
// and end after a terminal or interrupted state (0.3: "final": true).
//
// Push notification configs are records of kind "a2a_push". On every task
// change each config's URL gets a POST: 1.0 configs get the change's
// stream events ({"statusUpdate": …}), 0.3 configs get the task. The token
// travels in X-A2A-Notification-Token and authentication as
// "Authorization: <scheme> <credentials>". Failed posts are retried with
// the relay's backoff (6 attempts).
//
// # Parts
//
// text ⇄ text; canonical code ⇄ text with metadata switchboard_kind "code"
// and language; image/file by URL ⇄ {url, mediaType, filename}; by bytes ⇄
// {raw} (0.3: file.bytes base64); data ⇄ data (0.3 wraps non-objects as
// {"value": …} with metadata data_part_compat, as @a2a-js/sdk does).
// Media types image/* map to image parts, others to file parts.
//
// Errors use the specification's JSON-RPC codes: -32700 parse error,
// -32600 invalid request, -32601 method not found, -32602 invalid params
// (also oversized messages), -32603 internal, -32001 task not found, -32002
// task not cancelable, -32004 unsupported operation, -32005 content type
// not supported, -32007 extended card not configured, -32009 version not
// supported; 1.0 errors carry a google.rpc.ErrorInfo in data.
package a2a
