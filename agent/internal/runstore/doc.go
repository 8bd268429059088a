// Package runstore is how the agent engine reads and writes its runs: the
// decoded states of recently active runs kept in the process (Cache), so
// that a run the process wrote or read a moment ago is not decoded again
// and can be written at its known version without being read first.
//
// It knows the runs' records only as a store.Record of kind
// [store.KindRun] holding the encoding of a state S, which package agent
// decodes and copies.
package runstore
