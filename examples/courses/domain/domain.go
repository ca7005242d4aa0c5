package domain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/sourced-go/sourced/shell/sourced"
)

// Commands and events are plain structs; their JSON names are the
// attributes the log indexes.
type (
	CreateCourse struct {
		CourseID   string `json:"course_id" sourced:"required"`
		CourseName string `json:"course_name" sourced:"required"`
	}
	CourseCreated struct {
		CourseID   string `json:"course_id"`
		CourseName string `json:"course_name"`
	}
	EnrolStudent struct {
		CourseID  string `json:"course_id" sourced:"required"`
		StudentID string `json:"student_id" sourced:"required"`
	}
	StudentEnrolled struct {
		CourseID  string `json:"course_id"`
		StudentID string `json:"student_id"`
	}
	NotifyStudent struct {
		StudentID string `json:"student_id"`
		CourseID  string `json:"course_id" sourced:"required"`
	}
	StudentNotified struct {
		StudentID string `json:"student_id"`
		CourseID  string `json:"course_id"`
	}
	SendReminder struct {
		CourseID string `json:"course_id" sourced:"required"`
	}
	ReminderSent struct {
		CourseID string `json:"course_id"`
	}
)

// Registry registers every message type under its stable type string.
func Registry() (*sourced.Registry, error) {
	reg := sourced.NewRegistry()
	return reg, errors.Join(
		sourced.Register[CreateCourse](reg, "courses.create"),
		sourced.Register[CourseCreated](reg, "courses.created"),
		sourced.Register[EnrolStudent](reg, "courses.enrol_student"),
		sourced.Register[StudentEnrolled](reg, "courses.student_enrolled"),
		sourced.Register[NotifyStudent](reg, "students.notify"),
		sourced.Register[StudentNotified](reg, "students.notified"),
		sourced.Register[SendReminder](reg, "courses.send_reminder"),
		sourced.Register[ReminderSent](reg, "courses.reminder_sent"),
	)
}

// CourseNames keeps course names unique: its boundary is the name. A day
// one course gets a reminder one second after it is created.
var CourseNames = sourced.Decider[bool]{Group: "courses.course_names", PartitionBy: []string{"course_name"}}.With(
	sourced.Evolve(func(_ bool, _ CourseCreated) bool { return true }),
	sourced.Decide(func(taken bool, c CreateCourse) ([]any, error) {
		if taken {
			return nil, fmt.Errorf("course %q already exists", c.CourseName)
		}
		return []any{CourseCreated(c)}, nil
	}),
	sourced.React(func(_ bool, e CourseCreated) []any {
		return []any{sourced.After(time.Second, SendReminder{CourseID: e.CourseID})}
	}),
)

// Capacity is how many students a course takes.
const Capacity = 2

// Enrolments enforces each course's capacity and notifies the students.
var Enrolments = sourced.Decider[[]string]{Group: "courses.enrolments", PartitionBy: []string{"course_id"}}.With(
	sourced.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
	sourced.Decide(func(s []string, c EnrolStudent) ([]any, error) {
		switch {
		case slices.Contains(s, c.StudentID):
			return nil, fmt.Errorf("%s is already enrolled in %s", c.StudentID, c.CourseID)
		case len(s) >= Capacity:
			return nil, fmt.Errorf("course %s is full", c.CourseID)
		}
		return []any{StudentEnrolled(c)}, nil
	}),
	sourced.React(func(_ []string, e StudentEnrolled) []any {
		return []any{NotifyStudent{StudentID: e.StudentID, CourseID: e.CourseID}}
	}),
)

// Roster is the read model of a course.
type Roster struct {
	CourseID string   `json:"course_id"`
	Name     string   `json:"name"`
	Students []string `json:"students"`
}

// ReadModel is where the Rosters projector keeps the rosters: a table in
// the store's own database, written in the transaction that acknowledges
// the events (so the read model never lags or runs ahead of its offset).
// Each store has its own (see the SQLite and PostgreSQL mains).
type ReadModel interface {
	// Save writes a course's roster in tx, the batch's transaction.
	Save(ctx context.Context, tx sourced.SyncTx, r Roster) error
	// Rosters reads every roster, in course id order.
	Rosters(ctx context.Context) ([]Roster, error)
}

// Rosters projects each course's roster into the read model, in the
// transaction that acknowledges the events.
func Rosters(rm ReadModel) sourced.Projector[Roster] {
	return sourced.Projector[Roster]{Group: "courses.rosters", PartitionBy: []string{"course_id"}}.With(
		sourced.Evolve(func(r Roster, e CourseCreated) Roster { r.CourseID, r.Name = e.CourseID, e.CourseName; return r }),
		sourced.Evolve(func(r Roster, e StudentEnrolled) Roster {
			r.CourseID, r.Students = e.CourseID, append(r.Students, e.StudentID)
			return r
		}),
		sourced.Sync(func(ctx context.Context, tx sourced.SyncTx, b sourced.Batch[Roster]) error {
			return rm.Save(ctx, tx, b.State)
		}),
	)
}

// Notifications sends what the other reactors dispatch.
var Notifications = sourced.Decider[struct{}]{Group: "notifications", PartitionBy: []string{"course_id"}}.With(
	sourced.Decide(func(_ struct{}, c NotifyStudent) ([]any, error) { return []any{StudentNotified(c)}, nil }),
	sourced.Decide(func(_ struct{}, c SendReminder) ([]any, error) { return []any{ReminderSent(c)}, nil }),
)

// Run runs the scenario on store, whose read model is rm, with the
// background runtime, and prints what happens to out (where names the
// store): commands are handled synchronously (as a web handler would) and
// also appended for the workers; it returns once everything has settled,
// the scheduled reminder included.
func Run(ctx context.Context, store sourced.Store, rm ReadModel, where string, out io.Writer) error {
	cfg := sourced.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := sourced.NewRuntime(store, cfg, CourseNames, Enrolments, Rosters(rm), Notifications)
	if err != nil {
		return err
	}
	if err := rt.Start(ctx); err != nil {
		return err
	}
	defer rt.Stop(ctx)
	fmt.Fprintf(out, "store: %s\n", where)

	// A web handler decides commands synchronously...
	handle := func(cmd any) {
		var err error
		switch c := cmd.(type) {
		case CreateCourse:
			_, err = sourced.Handle(ctx, store, CourseNames, c)
		case EnrolStudent:
			_, err = sourced.Handle(ctx, store, Enrolments, c)
		}
		if err != nil {
			fmt.Fprintf(out, "  %T %+v: rejected: %v\n", cmd, cmd, err)
			return
		}
		fmt.Fprintf(out, "  %T %+v: accepted\n", cmd, cmd)
	}
	fmt.Fprintln(out, "handling commands:")
	handle(CreateCourse{CourseID: "c1", CourseName: "Algebra"})
	handle(CreateCourse{CourseID: "c2", CourseName: "Algebra"})
	handle(CreateCourse{CourseID: "c2", CourseName: "History"})
	handle(EnrolStudent{CourseID: "c1", StudentID: "ada"})
	handle(EnrolStudent{CourseID: "c1", StudentID: "ada"})
	handle(EnrolStudent{CourseID: "c1"})
	handle(EnrolStudent{CourseID: "c2", StudentID: "edsger"})

	// ... and the workers decide the ones appended for them.
	async := sourced.Messages(
		EnrolStudent{CourseID: "c1", StudentID: "grace"},
		EnrolStudent{CourseID: "c2", StudentID: "alan"},
	)
	if _, err := store.Append(ctx, async, sourced.AppendOptions{}); err != nil {
		return err
	}
	fmt.Fprintln(out, "appended 2 enrolments for the workers; waiting for everything to settle (a reminder is due in 1s)")
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := rt.WaitIdle(wait, time.Minute); err != nil {
		return fmt.Errorf("waiting for the workers: %w", err)
	}

	fmt.Fprintln(out, "handling one more command:")
	handle(EnrolStudent{CourseID: "c1", StudentID: "alan"})

	fmt.Fprintln(out, "rosters (read model):")
	rosters, err := rm.Rosters(ctx)
	if err != nil {
		return err
	}
	for _, r := range rosters {
		fmt.Fprintf(out, "  %s %s %v\n", r.CourseID, r.Name, r.Students)
	}
	counts := map[string]int{}
	for m, err := range store.All(ctx, sourced.ReadAllOptions{}) {
		if err != nil {
			return err
		}
		counts[m.Type]++
	}
	fmt.Fprintln(out, "log:")
	types := make([]string, 0, len(counts))
	for t := range counts {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		fmt.Fprintf(out, "  %-26s %d\n", t, counts[t])
	}
	st, err := store.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "consumer groups:")
	for _, g := range st.Groups {
		line := fmt.Sprintf("  %-22s %-7s processed up to %d", g.ID, g.Status, g.NewestProcessed)
		if g.Status == "failed" {
			line += ": " + g.Failure.Error
		}
		fmt.Fprintln(out, line)
	}
	return nil
}
