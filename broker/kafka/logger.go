package kafka

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoLogger passes franz-go's log lines to a *slog.Logger, prefixed with
// "kafka: ", at the levels the logger has enabled: warnings and errors of
// the client (a lost session, a failed commit) reach Options.Logger.
type kgoLogger struct{ l *slog.Logger }

// Level returns the most verbose level the slog logger handles.
func (k kgoLogger) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case k.l.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelDebug
	case k.l.Enabled(ctx, slog.LevelInfo):
		return kgo.LogLevelInfo
	case k.l.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	case k.l.Enabled(ctx, slog.LevelError):
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}

// Log logs a line of the client.
func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var l slog.Level
	switch level {
	case kgo.LogLevelError:
		l = slog.LevelError
	case kgo.LogLevelWarn:
		l = slog.LevelWarn
	case kgo.LogLevelInfo:
		l = slog.LevelInfo
	default:
		l = slog.LevelDebug
	}
	k.l.Log(context.Background(), l, "kafka: "+msg, keyvals...)
}
