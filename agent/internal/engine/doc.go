// Package engine holds the mechanisms of package agent's handlers and
// streams that need nothing of an agent: making a costly call once in a
// process ([Flights]) and across processes ([Claims]), running tool calls
// on kept goroutines ([Executor]), retrying through an outage of a service
// ([UntilAvailable], [RetryOutage]), the deterministic ids of a run's
// events ([InferenceID] and the others), the records of a custom step's
// calls ([RecordCall], [RecordedCall]), and carrying out on an in-process
// broker the approval answers other processes record ([ApprovalWatch]).
//
// For a run's stream it restores causal order over any event type
// ([StreamOrder], [ChainOrder]; package agent says what each of its events
// waits for), and turns a structured output's text, as it streams, into
// partial outputs ([Partials], on [CompleteJSON]).
//
// The handlers themselves, their inference stages and the run's stored
// state are still in package agent, which uses these by name: the run's
// record holds values of agent's exported types (budgets, permissions,
// hooks' decisions, handoffs), which would have to move below agent with
// it.
package engine
