package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notifications across processes.
//
// After every commit that appends to the log, the store sends NOTIFY on
// its channel (see channelFor) with the sending store's origin, the last
// position written and the distinct types, coalescing the commits that
// follow while one notification is on its way (see wakes). It is sent
// after the commit, never before and never for a rollback: a listener
// never hears of an append it cannot read yet. A Listener turns them into
// calls of the store's notifier (Options.Notifier) in its own process,
// skipping its own store's (which that notifier hears of directly after
// the commit).

// maxNotifyTypes bounds the notification payload (PostgreSQL's limit is
// 8000 bytes); a commit with more type names announces "*", every type.
const maxNotifyTypes = 6000

// allTypes is the type list of a notification too long to send.
const allTypes = "*"

// scheduledMark is in the type list of a notification when a commit it
// gathers scheduled messages: the listeners wake their schedulers (see
// Store.ScheduledCommits). No type is so named (codec type names are
// lower-case letters, digits, '.', '_' and '-'); a listener of an older
// version passes it on as a type no reactor handles, which wakes its
// scheduler as any notification did; so does a listener of this one,
// to its notifier's subscribers (the runtime handles no such type).
const scheduledMark = "+scheduled"

// channelFor is the notification channel of a store: a name derived from
// the schema and prefix that fits PostgreSQL's 63-byte identifiers.
func channelFor(key int64) string {
	return "sourced_" + strconv.FormatUint(uint64(key), 16)
}

// notification is the payload of the NOTIFY of a commit: origin, last
// position, then the types, separated by newlines (type names hold none).
func notification(origin string, last int64, types []string) string {
	list := strings.Join(types, "\n")
	if len(list) > maxNotifyTypes {
		list = allTypes
	}
	return origin + "\n" + strconv.FormatInt(last, 10) + "\n" + list
}

// parseNotification splits a notification payload.
func parseNotification(payload string) (origin string, last int64, types []string) {
	parts := strings.Split(payload, "\n")
	if len(parts) < 3 {
		return "", 0, nil
	}
	last, _ = strconv.ParseInt(parts[1], 10, 64)
	return parts[0], last, parts[2:]
}

// Listener receives the store's notifications from other processes and
// announces them to the store's notifier, so that workers in this process
// wake within milliseconds of an append made anywhere. It holds one
// connection of its own. When the connection breaks it reconnects (with
// backoff) and catches up: it announces the types of every message
// appended since the last position it heard of, so no append is missed.
// The runtime's catch-up poll stays the safety net.
type Listener struct {
	s      *Store
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	last int64 // the newest position heard of
	conn *pgx.Conn
	// reconnects counts the reconnections, for tests and monitoring.
	reconnects int
}

// listenerApp is the application_name of a listener's connection.
const listenerApp = "sourced-listener"

// Listen starts a Listener: it connects and LISTENs before it returns
// (so that every append committed afterwards is announced), then listens
// until Close.
func (s *Store) Listen(ctx context.Context) (*Listener, error) {
	l := &Listener{s: s, done: make(chan struct{})}
	if err := s.pool.QueryRow(ctx, s.q.headPosition).Scan(&l.last); err != nil {
		return nil, s.wrap(ctx, "listen", err)
	}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, s.wrap(ctx, "listen", err)
	}
	l.conn = conn
	lctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(lctx)
	return l, nil
}

func (l *Listener) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg := l.s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = listenerApp + " " + l.s.channel
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.s.channel}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// Channel returns the store's notification channel (LISTEN it to hear of
// appends from any process).
func (s *Store) Channel() string { return s.channel }

// Close stops the listener and closes its connection.
func (l *Listener) Close() error {
	l.cancel()
	<-l.done
	return nil
}

// Reconnects returns how many times the listener reconnected.
func (l *Listener) Reconnects() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reconnects
}

func (l *Listener) run(ctx context.Context) {
	defer close(l.done)
	s := l.s
	conn := l.conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	backoff := 50 * time.Millisecond
	for {
		n, err := conn.WaitForNotification(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			backoff = 50 * time.Millisecond
			origin, last, types := parseNotification(n.Payload)
			l.heard(last)
			if origin == s.origin {
				continue
			}
			if slices.Contains(types, scheduledMark) || len(types) == 1 && types[0] == allTypes {
				s.scheduledCommits.Add(1) // wakes this process's scheduler too
			}
			if len(types) > 0 {
				l.announce(types)
			}
			continue
		}
		s.log.Warn("pgstore: listener lost its connection; reconnecting", "channel", s.channel, "error", err)
		conn.Close(context.Background())
		conn = nil
		for conn == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			c, err := l.connect(ctx)
			if err != nil {
				s.log.Warn("pgstore: listener reconnect failed", "error", err)
				continue
			}
			missed, err := l.catchUp(ctx)
			if err != nil {
				s.log.Warn("pgstore: listener catch-up failed", "error", err)
				c.Close(context.Background())
				continue
			}
			conn = c
			// Count the reconnection before announcing what it caught up
			// on, so whoever is woken by the catch-up sees it counted.
			l.mu.Lock()
			l.reconnects++
			l.mu.Unlock()
			// What was scheduled meanwhile is not known: the scheduler
			// is woken too.
			s.scheduledCommits.Add(1)
			l.announce(append(missed, scheduledMark))
		}
	}
}

// heard notes the newest position a notification reported.
func (l *Listener) heard(last int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = max(l.last, last)
}

// catchUp returns the types appended since the last position heard of:
// the notifications missed while the connection was down. It runs after
// LISTEN succeeded, so nothing falls between.
func (l *Listener) catchUp(ctx context.Context) ([]string, error) {
	s := l.s
	l.mu.Lock()
	since := l.last
	l.mu.Unlock()
	var head int64
	if err := s.pool.QueryRow(ctx, s.q.headPosition).Scan(&head); err != nil {
		return nil, err
	}
	if head <= since {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT DISTINCT message_type FROM %s WHERE position > $1 AND position <= $2 AND message_type <> ''`, s.names.messages), since, head)
	if err != nil {
		return nil, err
	}
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	l.heard(head)
	return types, nil
}

// announce tells the store's notifier.
func (l *Listener) announce(types []string) {
	if len(types) == 1 && types[0] == allTypes {
		types = types[:0]
		for _, t := range l.s.reg.Types() {
			types = append(types, t.Name)
		}
	}
	l.s.notifier.Notify(types)
}

// wakes sends this store's notifications to other processes after the
// commits they announce, coalesced: the commits that follow a send by
// less than notifyGap (or the first after a quiet spell by less than
// notifyLinger) are gathered into the next (their newest position and the
// union of their types; TestWakesCoalesce). Sending NOTIFY inside the appending
// transaction would take PostgreSQL's cluster-wide notification lock
// from the commit's start to its end, serialising every append's commit;
// sent after the commit, by a statement of its own, it serialises only
// the notifications. A notification that is lost (the process dies
// between the commit and the send) is made good by the runtime's
// catch-up poll, as is one lost with a listener's connection.
type wakes struct {
	s    *Store
	mu   sync.Mutex
	last int64
	// types are the distinct types gathered since the last send.
	types   []string
	pending bool
	// sending is set while a goroutine sends; kick wakes it.
	sending bool
	idle    *sync.Cond
	closed  bool
}

func newWakes(s *Store) *wakes {
	w := &wakes{s: s}
	w.idle = sync.NewCond(&w.mu)
	return w
}

// add gathers a commit's newest position and types, and starts a sender
// unless one runs.
func (w *wakes) add(last int64, types []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.last = max(w.last, last)
	for _, t := range types {
		w.types = appendDistinct(w.types, t)
	}
	w.pending = true
	if !w.sending {
		w.sending = true
		go w.run()
	}
}

// notifyLinger is how long a sender waits before it sends, gathering the
// commits that follow: a lone writer's appends otherwise cost a
// notification each (one more statement per append, about a sixth of its
// rate on a Unix socket), for a wake-up that may come a millisecond later.
const notifyLinger = time.Millisecond

// notifyGap is how long a sender waits after a send before the next,
// while commits keep coming: a store sends at most about one notification
// per notifyGap, its first after a quiet spell notifyLinger after the
// commit. A notification costs a statement on a connection of its own
// and, on the server, a backend woken for it and every listener's woken
// to hear it: sent every millisecond by a lone writer of Handles (about
// two commits a notification), they took 15-20 % of
// BenchmarkPostgresHandle's rate (1,049-1,238 cmds/s against 885-1,077
// with a millisecond between sends, four alternated runs on a machine
// slower than the package doc's; none sent: 1,223-1,271; 5 ms between
// sends: 1,045-1,157; 20 ms: 1,156-1,237). Workers in other processes
// that are busy claim without waiting for one; an idle one hears of a
// commit at most this much later (the catch-up poll is the safety net).
const notifyGap = 10 * time.Millisecond

// notifySQL sends a notification: the store's channel ($1), the payload
// ($2, see notification).
const notifySQL = "SELECT pg_notify($1, $2)"

// run sends what is gathered until nothing is.
func (w *wakes) run() {
	wait := notifyLinger
	for {
		time.Sleep(wait)
		wait = notifyGap
		w.mu.Lock()
		if !w.pending {
			w.sending = false
			w.idle.Broadcast()
			w.mu.Unlock()
			return
		}
		payload := notification(w.s.origin, w.last, w.types)
		w.types, w.pending = nil, false
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := w.s.pool.Exec(ctx, notifySQL, w.s.channel, payload); err != nil {
			w.s.log.Debug("pgstore: notification not sent (the catch-up poll makes it good)", "err", err)
		}
		cancel()
	}
}

// close waits for the notifications gathered so far to be sent, and
// gathers no more.
func (w *wakes) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for w.sending {
		w.idle.Wait()
	}
}
