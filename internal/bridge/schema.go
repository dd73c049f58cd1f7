package bridge

import "encoding/json"

// The tools' JSON schemas, written by hand so that what the model reads is
// exactly the contract: timeoutSeconds an integer 1..60, cursors strings or
// null, records as the board reports them.

var (
	waitInputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "timeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 60, "default": 45,
      "description": "How long to wait for an action, in whole seconds (1 to 60, default 45)."},
    "cursor": {"type": ["string", "null"],
      "description": "The cursor from your previous bee_wait_action or bee_list_actions result. Omit it on the first call."}
  },
  "additionalProperties": false
}`)

	listInputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "since": {"type": ["string", "null"],
      "description": "A cursor from an earlier result: list only actions after it. Omit it to list the whole board."}
  },
  "additionalProperties": false
}`)

	emptyInputSchema = json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`)

	postInputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "to": {"type": ["string", "null"],
      "description": "Who may take it: omit for anyone, an agent name (e.g. \"reviewer\"), or one identity (\"agent:reviewer#0491068b\")."},
    "title": {"type": "string", "description": "One line saying what to do."},
    "body": {"type": "string", "description": "Everything the taker needs to do it."}
  },
  "required": ["title", "body"],
  "additionalProperties": false
}`)

	finishInputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "id": {"type": "string", "description": "The action's id exactly as bee_wait_action returned it."},
    "result": {"type": ["string", "null"], "description": "What you did or found, for whoever posted the action."}
  },
  "required": ["id"],
  "additionalProperties": false
}`)

	releaseInputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "id": {"type": "string", "description": "The action's id exactly as bee_wait_action returned it."}
  },
  "required": ["id"],
  "additionalProperties": false
}`)

	failInputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "id": {"type": "string", "description": "The action's id exactly as bee_wait_action returned it."},
    "reason": {"type": "string", "description": "Why it cannot be done, for whoever posted it."}
  },
  "required": ["id", "reason"],
  "additionalProperties": false
}`)

	cancelInputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "id": {"type": "string", "description": "The id of an action your agent posted, exactly as bee_post_action returned it."},
    "reason": {"type": ["string", "null"], "description": "Why it is no longer needed, for whoever holds it."}
  },
  "required": ["id"],
  "additionalProperties": false
}`)

	awaitInputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "ids": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 100,
      "description": "The ids of the actions to wait for, exactly as bee_post_action returned them."},
    "timeoutSeconds": {"type": "integer", "minimum": 1, "maximum": 60, "default": 45,
      "description": "How long to wait, in whole seconds (1 to 60, default 45)."}
  },
  "required": ["ids"],
  "additionalProperties": false
}`)

	recordSchema = `{
  "type": "object",
  "properties": {
    "id": {"type": "string"},
    "seq": {"type": "integer"},
    "to": {"type": "string"},
    "from": {"type": "string"},
    "title": {"type": "string"},
    "body": {"type": "string"},
    "state": {"type": "string", "enum": ["open", "claimed", "done", "failed", "cancelled"]},
    "holder": {"type": "string"},
    "holderGone": {"type": "boolean"},
    "result": {"type": "string"},
    "reason": {"type": "string"},
    "endedBy": {"type": "string"},
    "postedAt": {"type": "string"},
    "claimedAt": {"type": "string"},
    "endedAt": {"type": "string"}
  },
  "required": ["id", "seq", "to", "from", "title", "state", "postedAt"]
}`

	pageOutputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "records": {"type": "array", "items": ` + recordSchema + `},
    "cursor": {"type": "string"}
  },
  "required": ["records", "cursor"]
}`)

	recordsOutputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {"records": {"type": "array", "items": ` + recordSchema + `}},
  "required": ["records"]
}`)

	actionOutputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {"action": ` + recordSchema + `},
  "required": ["action"]
}`)

	whoamiOutputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "identity": {"type": "string"},
    "agent": {"type": "string"},
    "claudePid": {"type": ["integer", "null"]},
    "sessionId": {"type": "string"},
    "transcriptPath": {"type": "string"},
    "source": {"type": "string"},
    "pid": {"type": "integer"},
    "retired": {"type": "integer"},
    "since": {"type": "string"},
    "client": {"type": "string"}
  },
  "required": ["identity", "agent", "claudePid", "sessionId", "source", "pid"]
}`)
)
