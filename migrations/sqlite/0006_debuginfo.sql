-- Debug information files a tenant uploaded for native symbolization (ELF with DWARF or a
-- symbol table), one per GNU build id. The row is written once the object is stored.
CREATE TABLE debuginfo (
    tenant             TEXT   NOT NULL,
    build_id           TEXT   NOT NULL,
    object_key         TEXT   NOT NULL,
    file_name          TEXT   NOT NULL,
    size_bytes         BIGINT NOT NULL,
    uploaded_at_millis BIGINT NOT NULL,
    PRIMARY KEY (tenant, build_id)
);
