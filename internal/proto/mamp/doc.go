// Package mamp is the MAMP 1.0 (Minimal Agent Message Protocol) adapter:
// the /mamp/v1/* routes (messages, cards, agent registration, pull,
// conversations and their SSE stream, remote domains), the agent:// URI
// parser, the content translation between MAMP parts and the core's
// canonical parts, and the Encoder that pushes MAMP envelopes to MAMP
// agents' webhooks.
//
// Server is a hub adapter (Name, Mount, Run). Every route authenticates
// nothing itself and decides nothing itself: it hands the request's
// principal (core.PrincipalFrom) to the relay's operations (SendAs,
// RegisterAs, Conversation, PullAs, …), which decide who may do what, and
// its handlers return their errors, which httperr answers by kind. The
// adapter's own state (open callbacks, remote domains) lives in the record
// store the hub gives it (Options.Records); its background work (callback
// forwarding) runs in Run.
//
// # Translation rules
//
// MAMP content is a string (one text part) or an array of parts:
//   - text {text} ⇄ text part;
//   - code {language, code} ⇄ code part (Language, Text);
//   - image {source: {type: url, url, media_type} | {type: base64,
//     media_type, data}, name?} ⇄ image part (URL or Bytes, MediaType,
//     Name);
//   - file {name, mime_type, source: url | base64} ⇄ file part; a
//     base64 source's media_type is accepted for mime_type;
//   - data {data} (a Switchboard extension) ⇄ data part;
//   - any other field of a part ⇄ the canonical part's Meta.
//
// Out of the core, content is always an array. MAMP → core → MAMP gives
// the same content up to those two normalisations; core → MAMP → core gives
// the same parts. Declared media types of base64 data are checked against
// the bytes (see CheckMediaType). Across protocols the core's parts are the
// pivot: ATP payloads follow the atp package's rules.
//
// # Addressing
//
// agent://<hub host>/<id> is the local agent id; agent://<other domain>/<id>
// is the remote MAMP agent known locally as <id>@<domain>, reached through
// a configured base URL (Options.Remotes, PUT /mamp/v1/remotes/{domain}) or
// its own registration. See Addressing.
//
// docs/mamp.md describes the routes, the card rules, conversations and
// callback_url; docs/errors.md the error codes.
package mamp
