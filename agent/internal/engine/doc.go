// Package engine holds the mechanisms of package agent's handlers that
// need nothing of an agent: making a costly call once in a process
// ([Flights]) and across processes ([Claims]), running tool calls on kept
// goroutines ([Executor]), retrying through an outage of a service
// ([UntilAvailable], [RetryOutage]), completing the JSON of a structured
// output as far as it has streamed ([CompleteJSON]), and carrying out on
// an in-process broker the approval answers other processes record
// ([ApprovalWatch]).
//
// The handlers themselves, their inference stages and the run's stored
// state are still in package agent, which uses these by name.
package engine
