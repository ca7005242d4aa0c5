package memstore

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sourced-go/sourced/core"
	"github.com/sourced-go/sourced/shell/driver"
)

var _ driver.Parking = (*Store)(nil)

// park parks the partition of f.OffsetID (CmdPark; see driver.CmdPark): a
// partition gone meanwhile (its group reset) is left alone. A retrying
// group recovers.
func (t *tx) park(g *group, f driver.Failure) {
	if off := g.offsetByID(f.OffsetID); off != nil {
		t.saveOffset(off)
		off.parked = &parking{failure: f, at: t.s.now()}
		t.touch(off)
	}
	if g.status == driver.StatusRetrying {
		t.saveGroup(g)
		next, _ := driver.Transition(g.id, g.status, driver.CmdRecover)
		g.status, g.retryAt, g.failure = next, time.Time{}, driver.Failure{}
	}
}

// offsetByID returns g's offset with the id, or nil.
func (g *group) offsetByID(id int64) *offset {
	for _, off := range g.offsets {
		if off.id == id {
			return off
		}
	}
	return nil
}

// ParkedPartitions returns the parked partitions of group ("" for all);
// see driver.Parking.
func (s *Store) ParkedPartitions(ctx context.Context, group string) ([]driver.ParkedPartition, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	if group != "" {
		if _, err := s.group(group); err != nil {
			return nil, err
		}
	}
	out := []driver.ParkedPartition{}
	for _, off := range s.offsets {
		if off.parked != nil && (group == "" || off.g.id == group) {
			out = append(out, off.parkedInfo())
		}
	}
	driver.SortParked(out)
	return out, nil
}

var _ driver.ParkedReader = (*Store)(nil)

// ReadParked returns a page of parked partitions by ascending offset id;
// see driver.ParkedReader.
func (s *Store) ReadParked(ctx context.Context, q driver.ParkedQuery) ([]driver.ParkedPartition, error) {
	limit, err := driver.CheckParkedQuery(q)
	if err != nil {
		return nil, err
	}
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	if q.Group != "" {
		if _, err := s.group(q.Group); err != nil {
			return nil, err
		}
	}
	out := []driver.ParkedPartition{}
	for _, off := range s.offsets {
		if len(out) == limit {
			break
		}
		if off.id >= q.From && off.parked != nil && (q.Group == "" || off.g.id == q.Group) {
			out = append(out, off.parkedInfo())
		}
	}
	return out, nil
}

func (off *offset) parkedInfo() driver.ParkedPartition {
	return driver.ParkedPartition{
		Group:        off.g.id,
		OffsetID:     off.id,
		Partition:    maps.Clone(off.partition),
		LastPosition: off.last,
		Failure:      off.parked.failure,
		ParkedAt:     off.parked.at,
	}
}

// RetryPartition unparks the partition; see driver.Parking.
func (s *Store) RetryPartition(ctx context.Context, group string, partition core.Partition) (driver.ParkedPartition, error) {
	return s.unpark(ctx, group, partition, func(t *tx, off *offset) {})
}

// SkipFailedMessage moves the partition past its failed message and
// unparks it; see driver.Parking.
func (s *Store) SkipFailedMessage(ctx context.Context, group string, partition core.Partition) (driver.ParkedPartition, error) {
	return s.unpark(ctx, group, partition, func(t *tx, off *offset) {
		t.moveTo(off, off.parked.failure.Position)
	})
}

// ResetPartition moves the partition's offset back to the start and
// unparks it; see driver.Parking.
func (s *Store) ResetPartition(ctx context.Context, group string, partition core.Partition) (driver.ParkedPartition, error) {
	return s.unpark(ctx, group, partition, func(t *tx, off *offset) {
		g := off.g
		t.saveGroup(g)
		replay := maps.Clone(g.replay)
		if replay == nil {
			replay = map[string]int64{}
		}
		replay[off.key] = max(replay[off.key], off.last)
		g.replay = replay
		off.last = 0
		off.wake = nil
		for i := range t.s.log {
			r := &t.s.log[i]
			if !g.handles(r.typ) {
				continue
			}
			for _, tp := range g.tuples(r) {
				if tp.key == off.key {
					off.wake = append(off.wake, r.position)
					break
				}
			}
		}
	})
}

// unpark runs change on the parked offset of the partition, then unparks
// it and makes the group's claim scan dirty.
func (s *Store) unpark(ctx context.Context, group string, partition core.Partition, change func(t *tx, off *offset)) (driver.ParkedPartition, error) {
	var out driver.ParkedPartition
	err := s.write(ctx, func(t *tx) error {
		g, err := s.group(group)
		if err != nil {
			return err
		}
		if err := driver.CheckPartition(g.id, g.partitionBy, partition); err != nil {
			return err
		}
		off := g.offsets[g.keyOf(partition)]
		if off == nil || off.parked == nil {
			return g.notParked(partition)
		}
		out = off.parkedInfo()
		t.saveOffset(off)
		change(t, off)
		off.parked = nil
		t.touch(off)
		t.bump(g)
		t.announce(g)
		return nil
	})
	return out, err
}

// keyOf is the key of a partition of g (checked by driver.CheckPartition).
func (g *group) keyOf(partition core.Partition) string {
	if g.byID() {
		id, err := uuid.Parse(partition[core.IDKey])
		if err != nil {
			return ""
		}
		return partitionKey([]string{core.IDKey}, []string{id.String()})
	}
	values := make([]string, len(g.partitionBy))
	for i, name := range g.partitionBy {
		values[i] = partition[name]
	}
	return partitionKey(g.partitionBy, values)
}

// notParked describes a partition that is not parked.
func (g *group) notParked(partition core.Partition) error {
	var parked []string
	for _, off := range g.offsets {
		if off.parked != nil {
			parked = append(parked, core.Partition(off.partition).String())
		}
	}
	slices.Sort(parked)
	return &driver.NotParkedError{Group: g.id, Partition: maps.Clone(partition), Parked: parked}
}
