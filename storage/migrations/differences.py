"""How tables in a database differ from the models: what `upgrade` checks before adopting tables
that no migration recorded."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import Connection, MetaData, Table, UniqueConstraint, inspect


def model_tables(tables: Sequence[MetaData]) -> list[Table]:
    """The models' tables, in creation order."""
    return [table for metadata in tables for table in metadata.sorted_tables]


def schema_differences(
    connection: Connection,
    tables: Sequence[MetaData],
    schema: str | None,
    table_names: Iterable[str],
) -> list[str]:
    """How the named tables in the database differ from the models, one line each ([] if not)."""
    inspector = inspect(connection)
    dialect = connection.dialect
    wanted = set(table_names)
    differences: list[str] = []
    for table in model_tables(tables):
        if table.name not in wanted:
            continue
        name = table.name
        found = {c["name"]: c for c in inspector.get_columns(name, schema=schema)}
        expected = {c.name: c for c in table.columns}
        differences += [f"{name}: no column {c}" for c in sorted(expected.keys() - found.keys())]
        differences += [
            f"{name}: unknown column {c}" for c in sorted(found.keys() - expected.keys())
        ]
        for column_name in sorted(expected.keys() & found.keys()):
            model, reflected = expected[column_name], found[column_name]
            # Compiled DDL types compare across spellings (String(255) and VARCHAR(255)).
            want = str(model.type.compile(dialect=dialect))
            have = str(reflected["type"].compile(dialect=dialect))
            if want != have:
                differences.append(f"{name}.{column_name}: type {have}, the model says {want}")
            if bool(reflected["nullable"]) != bool(model.nullable):
                null = "NULL" if model.nullable else "NOT NULL"
                differences.append(f"{name}.{column_name}: the model says {null}")
        primary = inspector.get_pk_constraint(name, schema=schema)["constrained_columns"]
        if list(primary) != [c.name for c in table.primary_key.columns]:
            differences.append(f"{name}: primary key {list(primary)}")
        indexes = {
            i["name"]: list(i["column_names"])
            for i in inspector.get_indexes(name, schema=schema)
            # PostgreSQL also lists the index behind each unique constraint: compared below.
            if not i.get("duplicates_constraint")
        }
        expected_indexes = {i.name: [c.name for c in i.columns] for i in table.indexes}
        if indexes != expected_indexes:
            differences.append(f"{name}: indexes {indexes}, the models say {expected_indexes}")
        unique = sorted(
            tuple(u["column_names"]) for u in inspector.get_unique_constraints(name, schema=schema)
        )
        expected_unique = sorted(
            tuple(c.name for c in constraint.columns)
            for constraint in table.constraints
            if isinstance(constraint, UniqueConstraint)
        )
        if unique != expected_unique:
            differences.append(f"{name}: unique {unique}, the models say {expected_unique}")
    return differences
