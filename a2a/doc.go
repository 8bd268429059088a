// Package a2a speaks the Agent2Agent protocol (A2A 1.0) with the official
// Go SDK (github.com/a2aproject/a2a-go/v2): a [Server] offers a Calf
// agent, team or workflow to A2A clients, each task a durable Calf run.
package a2a
