// Package transport is the HTTP transport every model adapter shares:
// requests with retries (exponential backoff with jitter on connection
// errors, 408, 409, 429 and 5xx, honouring Retry-After, retry-after-ms and
// x-should-retry), a timeout per attempt, provider errors decoded into a
// *model.StatusError, a debug record per attempt, and a reader of
// server-sent events. The adapters encode and decode the providers' JSON
// with wire types of their own; this package moves the bytes.
package transport
