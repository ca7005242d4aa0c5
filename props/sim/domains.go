package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/effects"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/driver"
)

// Domain is an application the simulator runs on the store: its message
// types, its reactors, what its clients do, and the rules its log must
// obey. A domain value lives for one run (it may record what its reactors
// did, as the outside world would see it).
type Domain interface {
	// Name names the domain in traces.
	Name() string
	// Register registers the domain's message types.
	Register(reg *codec.Registry) error
	// Reactors are given to every simulated process's runtime.
	Reactors() []any
	// Ops is how many client operations Do knows (numbered from 0).
	Ops() int
	// Do runs client operation op with the parameter n (the simulator's
	// random choice: which course, which student...). Its error is an
	// invariant violation unless a fault was injected into the call, or
	// the client expects it (errors.Is ErrConcurrentAppend for a guarded
	// append).
	Do(ctx context.Context, c *Client, op int, n int64) error
	// Failing lists the groups that may retry and fail (their reactors
	// fail on purpose); every other group stays active.
	Failing() []string
	// Check checks the domain's rules on the log, re-derived from it;
	// final is true once the run has drained (liveness: everything that
	// must happen eventually has happened).
	Check(v *View, final bool) error
}

// AckDeleter is the optional interface of a Domain whose message types
// are deleted from the log once acknowledged (a delete-on-ack queue):
// Deletes lists those types. The World reads it when a run starts, and the
// invariant "nothing acknowledged is lost" then does not look for messages
// of those types in the log. The queue domain implements it; without it,
// every acknowledged message must stay in the log (or the schedule).
type AckDeleter interface{ Deletes() []string }

// HighestSeer is the optional interface of a Domain whose reactors see
// positions the log may no longer show (their messages deleted on ack):
// HighestSeen is the highest position they handled. The invariants read it
// after every step, so that an offset past the log's last message is not
// taken for one past every position given. The queue domain implements
// it; without it, the highest position given is the highest of the log's
// and of the acknowledged appends'.
type HighestSeer interface{ HighestSeen() int64 }

// Domains are the domains a run uses, by name, built fresh for each run
// (with the run's clock, for a domain whose definitions take one).
var Domains = map[string]func(*Clock) Domain{
	"courses": func(*Clock) Domain { return &courses{} },
	"queue":   func(*Clock) Domain { return &queue{processed: map[string]int{}} },
	"jobs":    func(*Clock) Domain { return &jobs{done: map[string][]int{}} },
	"doors":   func(*Clock) Domain { return &doors{} },
	"flows":   func(c *Clock) Domain { return newFlows(c) },
}

// DomainNames are the names of Domains in a fixed order.
var DomainNames = []string{"courses", "queue", "jobs", "doors", "flows"}

// ---- courses: the course and enrolment example of the manual ----

type (
	// EnrolStudent asks to enrol a student in a course.
	EnrolStudent struct {
		CourseID  string `json:"course_id" sourced:"required"`
		StudentID string `json:"student_id" sourced:"required"`
	}
	// StudentEnrolled records an enrolment.
	StudentEnrolled struct {
		CourseID  string `json:"course_id"`
		StudentID string `json:"student_id"`
	}
	// EnrolmentRejected records a refused enrolment (the worker path
	// cannot return a rejection to anyone: it is a fact).
	EnrolmentRejected struct {
		CourseID  string `json:"course_id"`
		StudentID string `json:"student_id"`
		Reason    string `json:"reason" sourced:"noindex"`
	}
	// NotifyStudent tells a student about an enrolment.
	NotifyStudent struct {
		StudentID string `json:"student_id" sourced:"required"`
		CourseID  string `json:"course_id"`
	}
	// StudentNotified records the notification.
	StudentNotified struct {
		StudentID string `json:"student_id"`
		CourseID  string `json:"course_id"`
	}
)

// Capacity is how many students a course takes.
const Capacity = 2

const (
	tEnrol     = "courses.enrol"
	tEnrolled  = "courses.enrolled"
	tRejected  = "courses.rejected"
	tNotify    = "students.notify"
	tNotified  = "students.notified"
	tQueueJob  = "queue.job"
	tJobTask   = "jobs.task"
	gEnrol     = "courses.enrolments"
	gNotify    = "students.notifications"
	gRosters   = "courses.rosters"
	gQueue     = "queue.worker"
	gJobs      = "jobs.runner"
	fullReason = "full"
	dupReason  = "already enrolled"
)

var enrolments = core.Decider[[]string]{Group: gEnrol, PartitionBy: []string{"course_id"}}.With(
	core.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
	core.Decide(func(s []string, c EnrolStudent) ([]any, error) {
		switch {
		case slices.Contains(s, c.StudentID):
			return []any{EnrolmentRejected{c.CourseID, c.StudentID, dupReason}}, nil
		case len(s) >= Capacity:
			return []any{EnrolmentRejected{c.CourseID, c.StudentID, fullReason}}, nil
		}
		return []any{StudentEnrolled(c)}, nil
	}),
	core.React(func(_ []string, e StudentEnrolled) []any {
		return []any{NotifyStudent{StudentID: e.StudentID, CourseID: e.CourseID}}
	}),
)

var notifications = core.Decider[int]{Group: gNotify, PartitionBy: []string{"student_id"}}.With(
	core.Decide(func(_ int, c NotifyStudent) ([]any, error) { return []any{StudentNotified(c)}, nil }),
)

var rosters = core.Projector[[]string]{Group: gRosters, PartitionBy: []string{"course_id"}}.With(
	core.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
)

type courses struct{}

func (*courses) Name() string { return "courses" }

func (*courses) Register(reg *codec.Registry) error {
	return errors.Join(
		codec.Register[EnrolStudent](reg, tEnrol),
		codec.Register[StudentEnrolled](reg, tEnrolled),
		codec.Register[EnrolmentRejected](reg, tRejected),
		codec.Register[NotifyStudent](reg, tNotify),
		codec.Register[StudentNotified](reg, tNotified),
	)
}

func (*courses) Reactors() []any   { return []any{enrolments, notifications, rosters} }
func (*courses) Ops() int          { return 3 }
func (*courses) Failing() []string { return nil }

func enrolOf(n int64) EnrolStudent {
	return EnrolStudent{CourseID: "c" + strconv.Itoa(int(n%3)), StudentID: "s" + strconv.Itoa(int(n/3%5))}
}

// Do: 0 appends an enrolment for the workers, 1 handles one synchronously
// (as a web handler), 2 decides in the client and appends the enrolment
// with the guard of its read (a guarded append that may conflict).
func (*courses) Do(ctx context.Context, c *Client, op int, n int64) error {
	cmd := enrolOf(n)
	switch op {
	case 0:
		return c.Append(ctx, []core.Message{core.NewMessage(cmd)}, driver.AppendOptions{})
	case 1:
		return c.Handle(ctx, enrolments, cmd)
	default:
		s, guard, err := shell.Load(ctx, c.Store, enrolments, map[string]string{"course_id": cmd.CourseID}, nil)
		if err != nil {
			return err
		}
		if slices.Contains(s, cmd.StudentID) || len(s) >= Capacity {
			return nil
		}
		err = c.Append(ctx, []core.Message{core.NewMessage(StudentEnrolled(cmd))}, driver.AppendOptions{Guard: &guard})
		if errors.Is(err, core.ErrConcurrentAppend) {
			return nil // another enrolment came first: the guard did its job
		}
		return err
	}
}

// Check: no course over capacity, no student enrolled twice, every
// rejection justified by the log before it; every enrolment command
// decided at most once (exactly once when final), after itself; every
// enrolment notified, every notification handled, once.
func (*courses) Check(v *View, final bool) error {
	type course struct{ students []string }
	cs := map[string]*course{}
	for _, m := range v.Log {
		switch p := m.Payload.(type) {
		case StudentEnrolled:
			c := cs[p.CourseID]
			if c == nil {
				c = &course{}
				cs[p.CourseID] = c
			}
			if slices.Contains(c.students, p.StudentID) {
				return fmt.Errorf("student %s enrolled twice in %s (position %d)", p.StudentID, p.CourseID, m.Position)
			}
			if len(c.students) >= Capacity {
				return fmt.Errorf("course %s over capacity: %s enrolled at position %d after %v", p.CourseID, p.StudentID, m.Position, c.students)
			}
			c.students = append(c.students, p.StudentID)
		case EnrolmentRejected:
			c := cs[p.CourseID]
			ok := c != nil && (p.Reason == dupReason && slices.Contains(c.students, p.StudentID) || p.Reason == fullReason && len(c.students) >= Capacity)
			if !ok {
				return fmt.Errorf("enrolment of %s in %s rejected (%s) at position %d, but the log before it does not say so", p.StudentID, p.CourseID, p.Reason, m.Position)
			}
		}
	}
	if err := v.ExactlyOnce(tEnrol, []string{tEnrolled, tRejected}, final); err != nil {
		return err
	}
	if err := v.ExactlyOnce(tEnrolled, []string{tNotify}, final); err != nil {
		return err
	}
	return v.ExactlyOnce(tNotify, []string{tNotified}, final)
}

// ---- queue: a delete-on-ack work queue ----

// QueueJob is a unit of work of the delete-on-ack queue.
type QueueJob struct {
	JobID string `json:"job_id" sourced:"required"`
}

type queue struct {
	processed map[string]int // job id -> times handled (the outside world)
	high      int64          // the highest position handled
}

// HighestSeen is the highest position the queue handled (its messages
// are deleted: the log no longer shows it).
func (q *queue) HighestSeen() int64 { return q.high }

var (
	_ HighestSeer = (*queue)(nil)
	_ AckDeleter  = (*queue)(nil)
)

func (*queue) Name() string { return "queue" }
func (*queue) Register(reg *codec.Registry) error {
	return codec.Register[QueueJob](reg, tQueueJob)
}
func (q *queue) Reactors() []any   { return []any{&queueWorker{q}} }
func (*queue) Ops() int            { return 1 }
func (*queue) Failing() []string   { return nil }
func (q *queue) Deletes() []string { return []string{tQueueJob} }

func (q *queue) Do(ctx context.Context, c *Client, _ int, n int64) error {
	return c.Append(ctx, []core.Message{core.NewMessage(QueueJob{JobID: "q" + strconv.FormatInt(n, 10)})}, driver.AppendOptions{})
}

// Check: a job gone from the log was handled (at least once); once
// drained, none is left.
func (q *queue) Check(v *View, final bool) error {
	for _, id := range v.AckedOfType(tQueueJob) {
		m, in := v.ByID[id]
		if in && final {
			return fmt.Errorf("queue job at position %d never handled and deleted", m.Position)
		}
		if !in && q.processed[v.Acked[id].Payload.(QueueJob).JobID] == 0 {
			return fmt.Errorf("queue job %v deleted without being handled", v.Acked[id].Payload)
		}
	}
	return nil
}

// queueWorker is an impure, exclusive reactor with no partition keys: a
// concurrent, unordered work queue whose messages are deleted when acked.
type queueWorker struct{ q *queue }

func (*queueWorker) HandledTypes() []string { return []string{tQueueJob} }
func (*queueWorker) GroupID() string        { return gQueue }
func (*queueWorker) Exclusive() bool        { return true }
func (w *queueWorker) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	var out []effects.Pair
	for _, m := range c.Messages {
		w.q.processed[m.Payload.(QueueJob).JobID]++
		w.q.high = max(w.q.high, m.Position)
		out = append(out, effects.Pair{Signals: []effects.Signal{effects.Ack{Delete: true}}, Source: m})
	}
	return out, nil
}

// ---- jobs: a reactor that fails on purpose, and its error strategy ----

// JobTask is one task of a job; a poisoned task always fails.
type JobTask struct {
	Job    string `json:"job" sourced:"required"`
	Seq    int    `json:"seq" sourced:"noindex"`
	Poison bool   `json:"poison" sourced:"noindex"`
}

var errPoison = errors.New("sim: poisoned task")

type jobs struct {
	done      map[string][]int // job -> seqs handled
	callbacks []string         // the error strategy's calls: "retry 1", "fail"
}

// JobRetries is the jobs group's error strategy: retries before it fails.
const JobRetries = 5

func (*jobs) Name() string                       { return "jobs" }
func (*jobs) Register(reg *codec.Registry) error { return codec.Register[JobTask](reg, tJobTask) }
func (j *jobs) Reactors() []any                  { return []any{&jobRunner{j}} }
func (*jobs) Ops() int                           { return 2 }
func (*jobs) Failing() []string                  { return []string{gJobs} }

// Do: 0 appends a task to one of four jobs, 1 a poisoned task to a job of
// its own (so that the partition that failed never acks: the group never
// recovers, and the strategy's count only grows).
func (j *jobs) Do(ctx context.Context, c *Client, op int, n int64) error {
	t := JobTask{Job: "j" + strconv.Itoa(int(n%4)), Seq: int(n)}
	if op == 1 {
		t = JobTask{Job: "poison" + strconv.FormatInt(n, 10), Seq: int(n), Poison: true}
	}
	return c.Append(ctx, []core.Message{core.NewMessage(t)}, driver.AppendOptions{})
}

// Check: the strategy counted each failure (retry counts strictly
// increasing, never a retry after the group failed); once drained, a
// poisoned group has failed and a healthy one handled every task.
func (j *jobs) Check(v *View, final bool) error {
	last, failed := 0, false
	for _, cb := range j.callbacks {
		if cb == "fail" {
			failed = true
			continue
		}
		n, _ := strconv.Atoi(cb[len("retry "):])
		if failed {
			return fmt.Errorf("the jobs group retried (count %d) after it failed; strategy calls %v", n, j.callbacks)
		}
		if n <= last {
			return fmt.Errorf("the jobs group's retry count went from %d to %d: a failure was not counted; strategy calls %v", last, n, j.callbacks)
		}
		last = n
	}
	if !final {
		return nil
	}
	poisoned := false
	for _, id := range v.AckedOfType(tJobTask) {
		if v.Acked[id].Payload.(JobTask).Poison {
			poisoned = true
		}
	}
	st := v.Status[gJobs]
	switch {
	case poisoned && st != driver.StatusFailed:
		return fmt.Errorf("a poisoned task was appended, yet after the drain the jobs group is %s, not failed (strategy calls %v)", st, j.callbacks)
	case !poisoned && st != driver.StatusActive:
		return fmt.Errorf("no task is poisoned, yet the jobs group is %s", st)
	case !poisoned:
		for _, id := range v.AckedOfType(tJobTask) {
			t := v.Acked[id].Payload.(JobTask)
			if !slices.Contains(j.done[t.Job], t.Seq) {
				return fmt.Errorf("task %s/%d never handled", t.Job, t.Seq)
			}
		}
	}
	return nil
}

// jobRunner is an impure reactor partitioned by job, with an error
// strategy of its own that records its calls.
type jobRunner struct{ j *jobs }

func (*jobRunner) HandledTypes() []string { return []string{tJobTask} }
func (*jobRunner) GroupID() string        { return gJobs }
func (*jobRunner) PartitionKeys() []string {
	return []string{"job"}
}
func (r *jobRunner) ErrorStrategy() shell.ErrorStrategy {
	return shell.ErrorStrategy{Retries: JobRetries, After: time.Second}.
		OnRetry(func(_ context.Context, rep shell.RetryReport) {
			r.j.callbacks = append(r.j.callbacks, "retry "+strconv.Itoa(rep.RetryCount))
		}).
		OnFail(func(context.Context, shell.FailureReport) { r.j.callbacks = append(r.j.callbacks, "fail") })
}
func (r *jobRunner) HandleClaim(_ context.Context, c effects.Claim) ([]effects.Pair, error) {
	var out []effects.Pair
	for i, m := range c.Messages {
		t := m.Payload.(JobTask)
		if t.Poison {
			return out, &core.BatchError{Message: m, Index: i, Err: errPoison}
		}
		r.j.done[t.Job] = append(r.j.done[t.Job], t.Seq)
		out = append(out, effects.Pair{Source: m})
	}
	return out, nil
}
