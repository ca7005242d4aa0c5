package cli

import (
	"slices"
	"testing"
)

// TestMigrationChanges: the summary of a migration script names the
// tables it creates, the columns it adds, the objects it alters and those
// it drops, the functions it defines, and counts its indexes.
func TestMigrationChanges(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want []string
	}{
		{`CREATE TABLE IF NOT EXISTS p_snapshots (id int); CREATE INDEX IF NOT EXISTS idx_a ON p_snapshots (id);`,
			[]string{"p_snapshots", "1 index"}},
		{`ALTER TABLE p_offsets ADD COLUMN IF NOT EXISTS parked text; ALTER INDEX idx_p_keys SET (fastupdate = off);`,
			[]string{"p_offsets.parked", "index idx_p_keys altered"}},
		{`DROP INDEX IF EXISTS idx_p_offsets_keys;
CREATE INDEX IF NOT EXISTS idx_p_offsets_keyed ON p_offsets USING gin (keys) WHERE message_id IS NULL;`,
			[]string{"index idx_p_offsets_keys dropped", "1 index"}},
		{`CREATE OR REPLACE FUNCTION p_refuse(reason text, detail text) RETURNS integer LANGUAGE plpgsql AS $$ BEGIN END $$;`,
			[]string{"function p_refuse"}},
	} {
		if got := changes(c.sql); !slices.Equal(got, c.want) {
			t.Errorf("changes(%q) = %q, want %q", c.sql, got, c.want)
		}
	}
}
