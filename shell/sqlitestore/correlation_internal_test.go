package sqlitestore

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

// ReadCorrelation finds the message by the unique id index and its chain
// by the correlation index, in position order without a sort, with and
// without planner statistics.
func TestReadCorrelationPlan(t *testing.T) {
	s := newTestStore(t, Options{Prefix: "plan"})
	ctx := t.Context()
	check := func(t *testing.T) {
		plan := explain(t, s, correlationQuery(s.names))
		for _, want := range []string{
			"SEARCH m USING INDEX idx_plan_messages_correlation (correlation_id=?)",
			"SEARCH c USING INDEX idx_plan_messages_id (message_id=?)",
		} {
			if !strings.Contains(plan, want) {
				t.Errorf("plan lacks %q:\n%s", want, plan)
			}
		}
		for _, bad := range []string{"SCAN", "TEMP B-TREE"} {
			if strings.Contains(plan, bad) {
				t.Errorf("plan has %q:\n%s", bad, plan)
			}
		}
	}
	t.Run("empty", check)

	// 200 chains of 1 to 5 messages, interleaved.
	var msgs []core.Message
	for i := range 200 {
		msgs = append(msgs, core.NewMessage(ev{Account: "a" + strconv.Itoa(i%20), Ref: "r" + strconv.Itoa(i)}))
	}
	res, err := s.Append(ctx, msgs, driver.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for depth := range 4 {
		next := make([]core.Message, 0, len(res.Messages))
		for i, src := range res.Messages {
			if i%5 > depth {
				next = append(next, core.NewMessage(other{N: i}).Correlate(src))
			}
		}
		if res, err = s.Append(ctx, next, driver.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.statsFloor = 0 // keep the statistics of this small log
	if err := s.Optimize(ctx); err != nil {
		t.Fatal(err)
	}
	t.Run("analyzed", check)
}
