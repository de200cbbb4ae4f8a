package shard

import (
	"fmt"
	"log/slog"
)

// gnetLogger sends gnet's own log lines to the server's slog logger: its
// informational lines at debug level, so sipedge's log stays sipedge's.
type gnetLogger struct{ log *slog.Logger }

func (l gnetLogger) Debugf(format string, args ...any) {
	l.log.Debug("gnet: " + fmt.Sprintf(format, args...))
}
func (l gnetLogger) Infof(format string, args ...any) {
	l.log.Debug("gnet: " + fmt.Sprintf(format, args...))
}
func (l gnetLogger) Warnf(format string, args ...any) {
	l.log.Warn("gnet: " + fmt.Sprintf(format, args...))
}
func (l gnetLogger) Errorf(format string, args ...any) {
	l.log.Error("gnet: " + fmt.Sprintf(format, args...))
}
func (l gnetLogger) Fatalf(format string, args ...any) {
	l.log.Error("gnet: " + fmt.Sprintf(format, args...))
}
