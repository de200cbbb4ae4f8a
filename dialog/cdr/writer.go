package cdr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Defaults of Options.
const (
	DefaultMaxSize    = 100 << 20 // bytes
	DefaultMaxBackups = 10
	DefaultQueue      = 65536 // records
)

// flushInterval bounds how long an accepted record may sit in the write
// buffer: a crash loses at most this much (plus the queue).
const flushInterval = 100 * time.Millisecond

// Errors.
var (
	ErrClosed        = errors.New("cdr: writer closed")
	ErrMetricsInUse  = errors.New("cdr: the metrics set already holds a CDR writer's metrics")
	errInvalidOption = errors.New("cdr: invalid option")
)

// Options configure a Writer. The zero value of a field selects its default.
type Options struct {
	// Path of the CDR file, e.g. "cdr.jsonl". Required. It is created with
	// mode 0640 if missing and appended to if present.
	Path string
	// MaxSize is the size in bytes the file may not exceed: before a line
	// that would take it past MaxSize, the file is rotated (a single line
	// larger than MaxSize gets a file of its own). 0 means DefaultMaxSize;
	// a negative value disables rotation (for logrotate with Reopen).
	MaxSize int64
	// MaxBackups is how many rotated files are kept: Path.1 (the newest) to
	// Path.<MaxBackups>; the oldest is deleted. 0 means DefaultMaxBackups.
	MaxBackups int
	// Queue is how many records may wait for the writer goroutine; Write
	// drops beyond it. 0 means DefaultQueue.
	Queue int
	// Metrics receives the writer's metrics; nil means a private set. A set
	// holds the metrics of one Writer only (New fails with ErrMetricsInUse).
	Metrics *metrics.Set
	// Log receives drops and I/O errors; nil means slog.Default().
	Log *slog.Logger
}

// Metric names.
const (
	metricWritten     = "sipedge_cdr_written_total"         // records flushed to the file
	metricDropped     = "sipedge_cdr_dropped_total"         // records refused by Write: queue full, or after Close
	metricWriteErrors = "sipedge_cdr_write_errors_total"    // records lost to an I/O error
	metricQueue       = "sipedge_cdr_queue_length"          // records waiting for the writer goroutine
	metricRotations   = "sipedge_cdr_rotations_total"       // size-based rotations
	metricShadowed    = "sipedge_cdr_fields_shadowed_total" // CDRFields keys left out because they name a built-in field
)

type writerMetrics struct {
	written, dropped, writeErrors, rotations, shadowed *metrics.Counter
}

// hooks are test-only callbacks. They run on the writer goroutine.
type hooks struct {
	beforeRecord func() // before a dequeued record is encoded
}

// closedBit is set in Writer.state by Close; the bits below count the Write
// calls between their check of closedBit and the end of their send.
const closedBit = 1 << 62

// Writer writes Records to a file from its own goroutine. See the package
// documentation for which goroutine may call what.
type Writer struct {
	queue     chan *Record
	kick      chan struct{} // wake: drain the queue now
	kickAt    int           // the queue length at which Write wakes the writer goroutine
	state     atomic.Int64  // closedBit | Write calls in flight
	reopenReq chan chan error
	done      chan struct{} // closed when the writer goroutine has exited
	closeOnce sync.Once
	closeErr  error // set by the writer goroutine before done is closed

	// Drop reporting: Write counts, the monitor goroutine logs.
	dropPending atomic.Uint64
	dropKick    chan struct{}
	monitorDone chan struct{}
	lateLogged  atomic.Bool // a Write after Close was logged

	log   *slog.Logger
	path  string
	m     writerMetrics
	hooks hooks

	// Owned by the writer goroutine.
	sink     *fileSink
	line     []byte
	pending  uint64 // records written to the buffer since the last flush
	ioLost   uint64 // records lost since the last I/O error log line
	ioErr    error  // the last I/O error not yet logged
	ioLogged time.Time
}

// New opens opts.Path and starts the writer goroutine. Call Close to stop it.
func New(opts Options) (*Writer, error) { return newWriter(opts, hooks{}) }

func newWriter(opts Options, h hooks) (*Writer, error) {
	if opts.Path == "" {
		return nil, fmt.Errorf("%w: Path is empty", errInvalidOption)
	}
	if opts.MaxBackups < 0 {
		return nil, fmt.Errorf("%w: MaxBackups %d is negative", errInvalidOption, opts.MaxBackups)
	}
	if opts.Queue < 0 {
		return nil, fmt.Errorf("%w: Queue %d is negative", errInvalidOption, opts.Queue)
	}
	if opts.MaxSize == 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.MaxBackups == 0 {
		opts.MaxBackups = DefaultMaxBackups
	}
	if opts.Queue == 0 {
		opts.Queue = DefaultQueue
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if slices.Contains(opts.Metrics.ListMetricNames(), metricWritten) {
		return nil, ErrMetricsInUse
	}
	w := &Writer{
		queue:       make(chan *Record, opts.Queue),
		kick:        make(chan struct{}, 1),
		kickAt:      max(1, opts.Queue/4),
		reopenReq:   make(chan chan error),
		done:        make(chan struct{}),
		dropKick:    make(chan struct{}, 1),
		monitorDone: make(chan struct{}),
		log:         opts.Log,
		path:        opts.Path,
		hooks:       h,
		sink:        newFileSink(opts.Path, opts.MaxSize, opts.MaxBackups),
	}
	if err := w.sink.open(); err != nil {
		return nil, err
	}
	set := opts.Metrics
	w.m = writerMetrics{
		written:     set.NewCounter(metricWritten),
		dropped:     set.NewCounter(metricDropped),
		writeErrors: set.NewCounter(metricWriteErrors),
		rotations:   set.NewCounter(metricRotations),
		shadowed:    set.NewCounter(metricShadowed),
	}
	set.NewGauge(metricQueue, func() float64 { return float64(len(w.queue)) })
	go w.run()
	go w.monitor()
	return w, nil
}

// Write queues r for writing and returns at once: it never blocks. It
// returns false when the queue is full or the Writer is closed; the record is
// then dropped, counted in sipedge_cdr_dropped_total and logged (at most one
// line a second, with the count). Write takes r over whatever it returns: the
// caller must not touch r afterwards. Safe for concurrent use.
func (w *Writer) Write(r *Record) bool {
	if w.state.Add(1)&closedBit != 0 {
		w.state.Add(-1)
		w.m.dropped.Inc()
		if w.lateLogged.CompareAndSwap(false, true) {
			// Once per Writer: the stop sequence closed the CDR writer
			// before the calls that still had records to write.
			w.log.Error("cdr record written after Close, dropped", "a_call_id", r.ACallID, "path", w.path)
		}
		ReleaseRecord(r)
		return false
	}
	select {
	case w.queue <- r:
		w.state.Add(-1)
		if len(w.queue) >= w.kickAt {
			w.wake()
		}
		return true
	default:
	}
	w.state.Add(-1)
	w.m.dropped.Inc()
	ReleaseRecord(r)
	w.dropPending.Add(1)
	select {
	case w.dropKick <- struct{}{}:
	default:
	}
	return false
}

// Reopen closes the file and opens Path again, for SIGHUP after logrotate
// has moved the file away: records buffered so far go to the old file, later
// ones to a new file at Path. The writer goroutine does it; Reopen waits for
// it and returns its error, or ErrClosed. Safe for concurrent use.
func (w *Writer) Reopen() error {
	if w.state.Load()&closedBit != 0 {
		return ErrClosed
	}
	c := make(chan error, 1)
	select {
	case w.reopenReq <- c:
		return <-c
	case <-w.done:
		return ErrClosed
	}
}

// Close stops accepting records (Write returns false from then on), lets the
// writer goroutine write every record already queued, flushes and closes the
// file. It returns the error of the final flush and close, or ctx.Err() if
// ctx ends first, in which case the writer goroutine still finishes in the
// background. Safe for concurrent and repeated use.
func (w *Writer) Close(ctx context.Context) error {
	w.closeOnce.Do(func() {
		w.state.Or(closedBit)
		// Write calls already past their check finish their non-blocking
		// send in a few instructions; then nobody sends on the queue again.
		for w.state.Load() != closedBit {
			time.Sleep(10 * time.Microsecond)
		}
		close(w.queue)
		w.wake()
	})
	select {
	case <-w.monitorDone:
		return w.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run is the writer goroutine. It does not wait on the queue: a
// goroutine waiting there would be woken by every Write, a goroutine switch
// (often a futex call on the shard's thread) per call. It takes what the
// queue holds every flushInterval, before it flushes, and sooner when a
// Write finds the queue a quarter full or Close closes it (wake).
func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(flushInterval)
	defer tick.Stop()
	for {
		select {
		case <-w.kick:
			if w.drain() {
				return
			}
		case c := <-w.reopenReq:
			if w.drain() { // records queued before Reopen go to the old file
				c <- ErrClosed
				return
			}
			c <- w.reopen()
		case now := <-tick.C:
			if w.drain() {
				return
			}
			w.flush()
			w.logIOError(now)
		}
	}
}

// wake makes the writer goroutine drain the queue now; safe from any
// goroutine, it never blocks.
func (w *Writer) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// drain writes every record queued; once Close closed the queue, it
// flushes and closes the file and reports true.
func (w *Writer) drain() (closed bool) {
	for {
		select {
		case r, ok := <-w.queue:
			if !ok {
				n := w.pending
				w.pending = 0
				err := w.sink.close()
				w.settle(n, err)
				w.closeErr = err
				w.logIOError(time.Time{})
				return true
			}
			w.write(r)
		default:
			return false
		}
	}
}

// write encodes r into the buffer, rotating or (after an error) opening the
// file first when needed, and returns r to the pool.
func (w *Writer) write(r *Record) {
	if w.hooks.beforeRecord != nil {
		w.hooks.beforeRecord()
	}
	line, shadowed := r.appendJSON(w.line[:0])
	ReleaseRecord(r)
	line = append(line, '\n')
	w.line = line
	if shadowed > 0 {
		w.m.shadowed.Add(shadowed)
	}
	if w.sink.f != nil && w.sink.needsRotation(len(line)) {
		w.rotate()
	}
	if w.sink.f == nil {
		if err := w.sink.open(); err != nil {
			w.ioFailed(err, 1)
			return
		}
	}
	if err := w.sink.write(line); err != nil {
		n := w.pending + 1
		w.pending = 0
		w.sink.close() // the buffer is lost: its error is the one just seen
		w.ioFailed(err, n)
		return
	}
	w.pending++
}

// flush writes the buffer to the file.
func (w *Writer) flush() {
	if w.pending == 0 {
		return
	}
	n := w.pending
	w.pending = 0
	err := w.sink.flush()
	if err != nil {
		w.sink.close()
	}
	w.settle(n, err)
}

// rotate closes the file and shifts it to the first backup. The next write
// opens a new file.
func (w *Writer) rotate() {
	n := w.pending
	w.pending = 0
	err := w.sink.close()
	w.settle(n, err)
	if err := w.sink.rotate(); err != nil {
		// Writing goes on into the same file; the next record tries again.
		w.ioFailed(err, 0)
		return
	}
	w.m.rotations.Inc()
}

// reopen closes the file and opens Path again.
func (w *Writer) reopen() error {
	n := w.pending
	w.pending = 0
	err := w.sink.close()
	w.settle(n, err)
	if err := w.sink.open(); err != nil {
		w.ioFailed(err, 0)
		return err
	}
	return nil
}

// settle accounts for n records that were in the buffer when it was flushed
// with result err.
func (w *Writer) settle(n uint64, err error) {
	if err != nil {
		w.ioFailed(err, n)
		return
	}
	w.m.written.AddInt64(int64(n))
}

// ioFailed counts lost records and logs err, at most once a second.
func (w *Writer) ioFailed(err error, lost uint64) {
	if lost > 0 {
		w.m.writeErrors.AddInt64(int64(lost))
	}
	w.ioLost += lost
	w.ioErr = err
	w.logIOError(time.Now())
}

// logIOError logs the pending I/O error unless one was logged less than a
// second before now; a zero now logs regardless.
func (w *Writer) logIOError(now time.Time) {
	if w.ioErr == nil || !now.IsZero() && now.Sub(w.ioLogged) < time.Second {
		return
	}
	w.log.Error("cdr write failed", "path", w.path, "records_lost", w.ioLost, "error", w.ioErr)
	w.ioLost, w.ioErr, w.ioLogged = 0, nil, now
}

// monitor logs queue-full drops: the first at once, then at most one line a
// second with the count since the previous line. It exits after the writer
// goroutine, logging what is left.
func (w *Writer) monitor() {
	defer close(w.monitorDone)
	pause := time.NewTimer(time.Second)
	pause.Stop()
	for {
		select {
		case <-w.dropKick:
		case <-w.done:
			w.logDrops()
			return
		}
		w.logDrops()
		pause.Reset(time.Second)
		select {
		case <-pause.C:
		case <-w.done:
			pause.Stop()
			w.logDrops()
			return
		}
	}
}

func (w *Writer) logDrops() {
	if n := w.dropPending.Swap(0); n > 0 {
		w.log.Error("cdr queue full, records dropped", "dropped", n, "queue", cap(w.queue), "path", w.path)
	}
}
