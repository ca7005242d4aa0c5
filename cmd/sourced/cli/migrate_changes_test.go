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
		{`CREATE OR REPLACE FUNCTION p_key(k text) RETURNS text LANGUAGE sql AS $$ SELECT k $$;
CREATE OR REPLACE FUNCTION p_advance() RETURNS void LANGUAGE plpgsql AS $$ BEGIN UPDATE p_head SET x = 1; END $$;
UPDATE p_offsets SET partition_key = p_key(partition_key) WHERE true;
UPDATE p_snapshots SET partition_key = p_key(partition_key); UPDATE p_offsets SET x = 1;
DROP FUNCTION p_key(text); DROP FUNCTION p_old(text);
CREATE TRIGGER IF NOT EXISTS p_bump AFTER INSERT ON p_groups BEGIN UPDATE p_counters SET n = n + 1; END;`,
			[]string{"function p_advance", "function p_old dropped", "p_offsets rows rewritten", "p_snapshots rows rewritten", "1 trigger"}},
	} {
		if got := changes(c.sql); !slices.Equal(got, c.want) {
			t.Errorf("changes(%q) = %q, want %q", c.sql, got, c.want)
		}
	}
}
