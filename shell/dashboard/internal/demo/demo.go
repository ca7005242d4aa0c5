// Package demo is a small course-enrolment application with data, for the
// dashboard's tests, its browser tests and its README screenshot: three
// deciders (one deciding on a query), a projector, a machine, a workflow,
// a group that fails and a scheduled message, a parked partition and two workers' heartbeats.
package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sourced-go/sourced/codec"
	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell"
	"github.com/sourced-go/sourced/shell/workflow"
	"github.com/sourced-go/sourced/statechart"
)

// The messages.
type (
	CreateCourse struct {
		CourseID string `json:"course_id" sourced:"required"`
		Title    string `json:"title" sourced:"required"`
	}
	CourseCreated struct {
		CourseID string `json:"course_id" sourced:"required"`
		Title    string `json:"title"`
	}
	EnrolStudent struct {
		CourseID  string `json:"course_id" sourced:"required"`
		StudentID string `json:"student_id" sourced:"required"`
	}
	StudentEnrolled struct {
		CourseID  string `json:"course_id"`
		StudentID string `json:"student_id"`
	}
	SendWelcome struct {
		StudentID string `json:"student_id" sourced:"required"`
		CourseID  string `json:"course_id"`
	}
	WelcomeSent struct {
		StudentID string `json:"student_id"`
		CourseID  string `json:"course_id"`
	}
	OpenCourse struct {
		CourseID string `json:"course_id" sourced:"required"`
	}
	CloseCourse struct {
		CourseID string `json:"course_id" sourced:"required"`
	}
	// ReserveSeat is decided on a query of its own: the course created,
	// and its enrolments.
	ReserveSeat struct {
		CourseID  string `json:"course_id" sourced:"required"`
		StudentID string `json:"student_id" sourced:"required"`
	}
	SeatReserved struct {
		CourseID  string `json:"course_id"`
		StudentID string `json:"student_id"`
		Seat      int    `json:"seat"`
	}
	// Seats is what a seat reservation decides on.
	Seats struct {
		Exists   bool `json:"exists"`
		Enrolled int  `json:"enrolled"`
		Reserved int  `json:"reserved"`
	}
	CourseRef struct {
		CourseID string `json:"course_id"`
	}
	DraftState struct {
		CourseRef
		statechart.Move
	}
	OpenState struct {
		CourseRef
		statechart.Move
	}
	ClosedState struct {
		CourseRef
		statechart.Move
	}
)

// App is the demo application's definitions.
type App struct {
	Registry   *codec.Registry
	Courses    core.Decider[bool]
	Enrolments core.Decider[[]string]
	Welcomes   core.Decider[bool]
	Catalog    core.Projector[int]
	Lifecycle  statechart.Machine[struct{}]
	// Seats decides ReserveSeat on a query (the course's creation and its
	// enrolments and Seats), across its course partition.
	Seats    core.Decider[Seats]
	Greeting *workflow.Definition[string, string]
	// Broken is a projector that fails on every student_enrolled, to show
	// a failed group.
	Broken core.Projector[int]
}

// New builds the application.
func New() *App {
	reg := codec.NewRegistry()
	codec.MustRegister[CreateCourse](reg, "courses.create_course")
	codec.MustRegister[CourseCreated](reg, "courses.course_created")
	codec.MustRegister[EnrolStudent](reg, "courses.enrol_student")
	codec.MustRegister[StudentEnrolled](reg, "courses.student_enrolled")
	codec.MustRegister[SendWelcome](reg, "courses.send_welcome")
	codec.MustRegister[WelcomeSent](reg, "courses.welcome_sent")
	codec.MustRegister[OpenCourse](reg, "courses.open_course")
	codec.MustRegister[CloseCourse](reg, "courses.close_course")
	codec.MustRegister[ReserveSeat](reg, "courses.reserve_seat")
	codec.MustRegister[SeatReserved](reg, "courses.seat_reserved")
	a := &App{Registry: reg}
	a.Courses = core.Decider[bool]{Group: "courses.course_decider", Label: "Courses", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(bool, CourseCreated) bool { return true }),
		core.Decide(func(exists bool, c CreateCourse) ([]any, error) {
			if exists {
				return nil, fmt.Errorf("course %s exists", c.CourseID)
			}
			return []any{CourseCreated(c)}, nil
		}).Emits(CourseCreated{}),
	)
	a.Enrolments = core.Decider[[]string]{Group: "courses.enrolment_decider", Label: "Enrolments", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(s []string, e StudentEnrolled) []string { return append(s, e.StudentID) }),
		core.Decide(func(s []string, c EnrolStudent) ([]any, error) { return []any{StudentEnrolled(c)}, nil }).Emits(StudentEnrolled{}),
		core.React(func(_ []string, e StudentEnrolled) []any {
			return []any{SendWelcome{StudentID: e.StudentID, CourseID: e.CourseID}}
		}).Emits(SendWelcome{}),
	)
	// Welcomes parks a student's partition when its mail bounces, and
	// goes on with the others: its refusals are failures (RefusalsFail),
	// not outcomes recorded as core.CommandRejected.
	a.Welcomes = core.Decider[bool]{Group: "courses.welcomes", Label: "Welcomes", PartitionBy: []string{"student_id"},
		Hooks: core.Hooks{ErrorStrategy: &core.ErrorStrategy{Park: true}, RefusalsFail: true}}.With(
		core.Evolve(func(bool, WelcomeSent) bool { return true }),
		core.Decide(func(_ bool, c SendWelcome) ([]any, error) {
			if c.StudentID == "grace" {
				return nil, errors.New("mailbox grace@example.com does not exist")
			}
			return []any{WelcomeSent(c)}, nil
		}).Emits(WelcomeSent{}),
	)
	a.Catalog = core.Projector[int]{Group: "courses.catalog", Label: "Catalog", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(n int, _ CourseCreated) int { return n }),
		core.Evolve(func(n int, _ StudentEnrolled) int { return n + 1 }),
	)
	a.Broken = core.Projector[int]{Group: "courses.search_index", Label: "Search index", PartitionBy: []string{"course_id"}}.With(
		core.Evolve(func(n int, _ StudentEnrolled) int { return n + 1 }),
		core.Sync(func(ctx context.Context, tx core.SyncTx, b core.Batch[int]) error {
			return errors.New("search service unreachable: connection refused")
		}),
	)
	exists := core.Projection[bool]{}.With(core.Evolve(func(bool, CourseCreated) bool { return true }))
	enrolled := core.Projection[int]{}.With(core.Evolve(func(n int, _ StudentEnrolled) int { return n + 1 }))
	reserved := core.Projection[int]{}.With(core.Evolve(func(n int, _ SeatReserved) int { return n + 1 }))
	a.Seats = core.Decider[Seats]{Group: "courses.seats", Label: "Seats", PartitionBy: []string{"course_id"},
		Snapshots: core.Snapshots[Seats]{Codec: core.JSONSnapshots[Seats]("seats/v1")}}.With(
		core.Evolve(func(s Seats, _ SeatReserved) Seats { s.Reserved++; return s }),
		core.Reads(func(c ReserveSeat) core.Query[Seats] {
			return core.Query[Seats]{
				core.Read(exists, func(s Seats, v bool) Seats { s.Exists = v; return s }, core.Where("course_id", c.CourseID)),
				core.Read(enrolled, func(s Seats, n int) Seats { s.Enrolled = n; return s }, core.Where("course_id", c.CourseID)),
				core.Read(reserved, func(s Seats, n int) Seats { s.Reserved = n; return s }, core.Where("course_id", c.CourseID)),
			}
		}),
		core.Decide(func(s Seats, c ReserveSeat) ([]any, error) {
			if !s.Exists {
				return nil, fmt.Errorf("no course %s", c.CourseID)
			}
			return []any{SeatReserved{CourseID: c.CourseID, StudentID: c.StudentID, Seat: s.Reserved + 1}}, nil
		}).Emits(SeatReserved{}),
	)
	draft := statechart.Declare[DraftState]("draft")
	open := statechart.Declare[OpenState]("open")
	closed := statechart.Declare[ClosedState]("closed")
	a.Lifecycle = statechart.Machine[struct{}]{Group: "courses.lifecycle", Label: "Course lifecycle", PartitionBy: []string{"course_id"}, Registry: reg}.Chart(
		statechart.Initial(statechart.On[CourseCreated](draft)),
		statechart.Place(draft, statechart.Command[OpenCourse](open)),
		statechart.Place(open,
			statechart.After(30*24*time.Hour, CloseCourse{}),
			statechart.Command[CloseCourse](closed)),
		statechart.Final(closed),
	)
	if err := a.Lifecycle.Register(reg); err != nil {
		panic(err)
	}
	a.Greeting = workflow.Define("greeting", func(w *workflow.Workflow, name string) (string, error) {
		msg, err := workflow.Step(w, "compose", func(context.Context) (string, error) { return "hello " + name, nil })
		if err != nil {
			return "", err
		}
		return workflow.Step(w, "send", func(context.Context) (string, error) { return msg + "!", nil })
	})
	if err := a.Greeting.Register(reg); err != nil {
		panic(err)
	}
	return a
}

// Reactors are the application's reactors, as it registers them.
func (a *App) Reactors() []any {
	return []any{a.Courses, a.Enrolments, a.Welcomes, a.Catalog, a.Lifecycle, a.Greeting, a.Broken, a.Seats}
}

// Seed fills store (opened with a.Registry) with a few courses,
// enrolments and a workflow run, processes them with a router, leaves
// the search index failed (retrying) and a course closing scheduled.
func (a *App) Seed(ctx context.Context, store shell.Store) (*shell.Router, error) {
	router, err := shell.NewRouter(store, shell.RouterOptions{ErrorStrategy: shell.ErrorStrategy{Retries: 3, After: time.Hour}}, a.Reactors()...)
	if err != nil {
		return nil, err
	}
	if err := router.Setup(ctx); err != nil {
		return nil, err
	}
	msgs := []any{
		CreateCourse{CourseID: "algebra", Title: "Algebra"},
		CreateCourse{CourseID: "poetry", Title: "Poetry"},
		EnrolStudent{CourseID: "algebra", StudentID: "ada"},
		EnrolStudent{CourseID: "algebra", StudentID: "alan"},
		EnrolStudent{CourseID: "poetry", StudentID: "grace"},
	}
	for _, m := range msgs {
		if _, err := store.Append(ctx, core.Messages(m), shell.AppendOptions{}); err != nil {
			return nil, err
		}
	}
	if err := router.Drain(ctx, &shell.DrainOptions{TolerateFailures: true}); err != nil {
		return nil, err
	}
	// Once the lifecycle machine saw the course created, it can open; a
	// seat is reserved once the enrolments are in.
	if _, err := store.Append(ctx, core.Messages(OpenCourse{CourseID: "algebra"}, ReserveSeat{CourseID: "algebra", StudentID: "ada"}), shell.AppendOptions{}); err != nil {
		return nil, err
	}
	if _, err := workflow.Start(ctx, store, a.Greeting, "Ada", workflow.WithID("greet-ada")); err != nil {
		return nil, err
	}
	if err := router.Drain(ctx, &shell.DrainOptions{TolerateFailures: true}); err != nil {
		return nil, err
	}
	if err := store.Heartbeat(ctx, []string{"demo-worker-1", "demo-worker-2"}, store.Now()); err != nil {
		return nil, err
	}
	return router, nil
}
