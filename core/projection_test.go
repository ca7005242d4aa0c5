package core_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
)

type roster struct {
	CourseID  string
	Students  []string
	UpdatedAt time.Time
	Closed    bool
}

var rosterProjection = core.Projection[roster]{}.With(
	core.BeforeEvolve(func(r roster, m core.Message) roster { r.UpdatedAt = m.CreatedAt; return r }),
	core.Evolve(func(r roster, e CourseCreated) roster { r.CourseID = e.CourseID; return r }),
	core.Evolve(func(r roster, e StudentEnrolled) roster { r.Students = append(r.Students, e.StudentID); return r }),
)

func TestProjectionFold(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := rosterProjection.Fold(
		stamped(CourseCreated{CourseID: "c1"}, at),
		stamped(StudentEnrolled{CourseID: "c1", StudentID: "s1"}, at.Add(time.Minute)),
		stamped(NotifyStudent{StudentID: "s1"}, at.Add(time.Hour)), // not handled: skipped, before-evolve too
	)
	if r.CourseID != "c1" || !slices.Equal(r.Students, []string{"s1"}) || !r.UpdatedAt.Equal(at.Add(time.Minute)) {
		t.Fatalf("roster %+v", r)
	}
}

func TestAdoptedProjectionIsNotChanged(t *testing.T) {
	d := core.Decider[roster]{Group: "rosters", PartitionBy: []string{"course_id"}}.With(
		core.Adopt(rosterProjection),
		core.Evolve(func(r roster, e CourseRenamed) roster { r.Closed = true; return r }),
	)
	if rosterProjection.Handles(core.PayloadType(CourseRenamed{})) {
		t.Fatal("the shared projection gained the adopter's handler")
	}
	s := d.Fold(CourseCreated{CourseID: "c1"}, CourseRenamed{CourseID: "c1"})
	if s.CourseID != "c1" || !s.Closed {
		t.Fatalf("adopter state %+v", s)
	}
	if got := len(d.EvolvedTypes()); got != 3 {
		t.Fatalf("adopter evolves %d types, want 3", got)
	}
}

func TestProjectorStep(t *testing.T) {
	var synced []roster
	base := core.Projector[roster]{Group: "rosters", PartitionBy: []string{"course_id"}}.With(
		core.Adopt(rosterProjection),
		core.React(func(r roster, e StudentEnrolled) []any { return []any{NotifyStudent{StudentID: e.StudentID}} }),
		core.Sync(func(ctx context.Context, tx core.SyncTx, b core.Batch[roster]) error {
			synced = append(synced, b.State)
			return nil
		}),
	)
	at := time.Now()
	h := []core.PositionedMessage{
		{Message: stamped(CourseCreated{CourseID: "c1"}, at), Position: 1},
		{Message: stamped(StudentEnrolled{CourseID: "c1", StudentID: "s1"}, at), Position: 2},
		{Message: stamped(StudentEnrolled{CourseID: "c1", StudentID: "s2"}, at), Position: 3},
	}
	t.Run("event-sourced rebuilds from history", func(t *testing.T) {
		synced = nil
		outs, err := base.Step(core.StepInput{History: h, Batch: h[2:]})
		if err != nil || len(outs) != 1 || len(outs[0].Reactions) != 1 || len(outs[0].Sync) != 1 {
			t.Fatalf("outs %+v err %v", outs, err)
		}
		_ = outs[0].Sync[0](context.Background(), nil)
		if len(synced) != 1 || !slices.Equal(synced[0].Students, []string{"s1", "s2"}) {
			t.Fatalf("synced %+v", synced)
		}
	})
	t.Run("state-stored evolves the batch on the loaded state", func(t *testing.T) {
		synced = nil
		p := base
		p.Load = func(ctx context.Context, part map[string]string) (roster, bool, error) {
			return roster{CourseID: part["course_id"], Students: []string{"s0"}}, true, nil
		}
		st, found, err := p.LoadState(context.Background(), map[string]string{"course_id": "c1"})
		if err != nil || !found {
			t.Fatal(found, err)
		}
		outs, err := p.Step(core.StepInput{Batch: h[2:], State: st, Loaded: true, Replaying: true})
		if err != nil || len(outs) != 1 || len(outs[0].Reactions) != 0 {
			t.Fatalf("outs %+v err %v (no reactions while replaying)", outs, err)
		}
		_ = outs[0].Sync[0](context.Background(), nil)
		if !slices.Equal(synced[0].Students, []string{"s0", "s2"}) {
			t.Fatalf("synced %+v", synced)
		}
		if p.Spec().History {
			t.Fatal("a state-stored projector reads no history")
		}
	})
}
