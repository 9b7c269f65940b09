-- Resource and profile attributes of a profile, kept apart because the series labels merge
-- them (with the scope) into one map. JSON text of a sorted string-to-string map.
ALTER TABLE profiles ADD COLUMN resource   TEXT NOT NULL DEFAULT '{}';
ALTER TABLE profiles ADD COLUMN attributes TEXT NOT NULL DEFAULT '{}';
