package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/internal/fixtures"
	"github.com/sourced-go/sourced/shell/driver"
	"github.com/sourced-go/sourced/shell/pgstore"
	"github.com/sourced-go/sourced/shell/storetest"
)

// A store appending to new tables has the planner's picture of them
// brought up to date as the log doubles, not only on its once-a-second
// tick (here an hourly one): 3,000 messages appended, the log has been
// analysed (pg_class.relpages set, 0 for a table never analysed nor
// vacuumed) within a couple of seconds. Without the early looks only the
// tick analyses it.
func TestNewLogAnalysedAsItGrows(t *testing.T) {
	defer pgstore.SetHealEvery(time.Hour)()
	reg, err := storetest.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, pgstore.Options{Registry: reg})
	ctx := t.Context()
	for i := range 30 {
		msgs := make([]core.Message, 100)
		for j := range msgs {
			msgs[j] = core.NewMessage(fixtures.CourseCreated{CourseName: fmt.Sprintf("course %d of a name long enough to fill pages", 100*i+j)})
		}
		if _, err := s.Append(ctx, msgs, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var pages int32
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := s.Pool().QueryRow(ctx, `SELECT relpages FROM pg_class WHERE oid = $1::regclass`, s.Prefix()+"_messages").Scan(&pages); err != nil {
			t.Fatal(err)
		}
		if pages > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pages == 0 {
		t.Fatal("the log of 3,000 messages was never analysed: relpages is 0")
	}
}
