import Libpq
import FoundationEssentials

/// The data contract (docs/behaviour.md#data-contract, `infra/migrations/data-contract.json`): every relation of the
/// schema that the functions read or write, with the columns, kinds and keys their statements need.
///
/// The migrator checks the schema against it after every run, whether the household relations are the functions'
/// own tables or views an operator mapped onto the app's tables (``Migrator``): a missing relation or column, a
/// column of another kind, a column the functions insert into that the view cannot take, or a key without the index
/// that serves it is refused with a message naming it, before any function runs.
public struct DataContract: Decodable, Sendable {
    public struct Relation: Decodable, Sendable {
        public let name: String
        /// `app` (households, sessions, medications, recordings) or `functions` (devices, the outbox, the caches).
        public let owner: String
        public let access: String
        public let meaning: String
        public let columns: [Column]
        /// Column sets a function looks rows up by: an index must serve each.
        public let lookups: [[String]]?
        /// Column sets a function's `INSERT … ON CONFLICT` names: a unique index must back each.
        public let conflictKeys: [[String]]?

        public var isApps: Bool { owner == "app" }
        public var insertedColumns: [String] { columns.filter { $0.insert == true }.map(\.name) }
    }

    public struct Column: Decodable, Sendable {
        public let name: String
        public let kind: String
        public let nullable: Bool?
        /// The functions insert this column.
        public let insert: Bool?
        /// `relation.column` whose type this column must have (the outbox's patient id follows the app's).
        public let sameTypeAs: String?
        public let meaning: String?
    }

    public let schema: String
    /// Each kind and the PostgreSQL types (as `format_type` names them) a column of that kind may have.
    public let kinds: [String: [String]]
    public let relations: [Relation]

    /// The contract's file name, beside the migrations.
    public static let fileName = "data-contract.json"

    public static func load(directory: URL) throws -> DataContract {
        let data = try Data(contentsOf: directory.appendingPathComponent(fileName))
        return try JSONDecoder().decode(DataContract.self, from: data)
    }

    /// The relations the app owns (and an operator may map), in the order they can be dropped.
    public var appRelations: [Relation] { relations.filter(\.isApps) }

    /// What is wrong with the schema as `connection` sees it, each as one sentence naming the relation and column;
    /// empty when the schema keeps the contract. Run inside the migrator's transaction; it changes nothing (the key
    /// checks run under a savepoint that is rolled back).
    public func violations(_ connection: PostgresConnection) throws -> [String] {
        var found: [String] = []
        let types = try columnTypes(connection)
        for relation in relations {
            let qualified = "\(schema).\(relation.name)"
            guard let columns = types[relation.name] else {
                found.append(
                    relation.isApps
                        ? "\(qualified) is missing: the app mapping must define it (a view over the app's table)"
                        : "\(qualified) is missing")
                continue
            }
            var usable = true
            for column in relation.columns {
                guard let type = columns[column.name] else {
                    found.append("\(qualified).\(column.name) is missing (\(column.meaning ?? column.kind))")
                    usable = false
                    continue
                }
                let accepted = kinds[column.kind] ?? []
                if !accepted.contains(type) {
                    found.append(
                        "\(qualified).\(column.name) is \(type); the contract wants \(column.kind): "
                            + accepted.joined(separator: " or "))
                    usable = false
                }
                if let other = column.sameTypeAs {
                    let parts = other.split(separator: ".").map(String.init)
                    if parts.count == 2, let otherType = types[parts[0]]?[parts[1]], otherType != type {
                        found.append("\(qualified).\(column.name) is \(type) but \(schema).\(other) is \(otherType)")
                    }
                }
            }
            let inserted = relation.insertedColumns
            if !inserted.isEmpty {
                let notInsertable = try insertBlockers(connection, relation: relation.name, columns: inserted)
                found += notInsertable.map { "\(qualified)\($0)" }
                if !notInsertable.isEmpty { usable = false }
            }
            guard usable else { continue }
            for key in relation.conflictKeys ?? [] {
                if let problem = try conflictKeyProblem(connection, relation: relation, key: key) {
                    found.append("\(qualified): \(problem)")
                }
            }
            for lookup in relation.lookups ?? []
            where !(try isServedByIndex(connection, relation.name, lookup, columns)) {
                found.append(
                    "\(qualified): no index serves a look-up by (\(lookup.joined(separator: ", "))): index the app's "
                        + "columns these map to")
            }
        }
        return found
    }

    /// Each relation of the schema with its columns' base types (a domain counts as its base type, any enum as `enum`).
    private func columnTypes(_ connection: PostgresConnection) throws -> [String: [String: String]] {
        var types: [String: [String: String]] = [:]
        let rows = try connection.query(
            """
            SELECT c.relname::text, a.attname::text,
                   CASE WHEN b.typtype = 'e' THEN 'enum' ELSE format_type(b.oid, NULL) END
            FROM pg_catalog.pg_class c
            JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
            JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
            JOIN pg_catalog.pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
            WHERE c.relnamespace = \(schema)::regnamespace AND c.relkind IN ('r', 'p', 'v')
            """)
        for row in rows {
            let (relation, column, type) = try row.decode((String, String, String).self)
            types[relation, default: [:]][column] = type
        }
        return types
    }

    /// Why `columns` of `relation` cannot be inserted into, each as a sentence's tail; empty when they can.
    private func insertBlockers(_ connection: PostgresConnection, relation: String, columns: [String]) throws
        -> [String]
    {
        let insertable =
            try connection.query(
                """
                SELECT is_insertable_into = 'YES' FROM information_schema.tables
                WHERE table_schema = \(schema) AND table_name = \(relation)
                """
            ).single?.decode(Bool.self, at: 0) ?? false
        guard insertable else {
            return [
                " cannot be inserted into: the functions insert recordings there (a view over one table, no "
                    + "DISTINCT, GROUP BY or join, is)"
            ]
        }
        return try connection.query(
            """
            SELECT column_name::text FROM information_schema.columns
            WHERE table_schema = \(schema) AND table_name = \(relation) AND is_updatable <> 'YES'
            """
        ).map { try $0.decode(String.self, at: 0) }.filter(columns.contains).sorted().map {
            ".\($0) cannot be inserted into (an expression in the view?): the functions write it"
        }
    }

    /// Whether an `INSERT … ON CONFLICT (key)` into `relation` finds its unique index: the planner resolves the
    /// arbiter index without running anything (`EXPLAIN`), under a savepoint so that a refusal leaves the
    /// transaction usable.
    private func conflictKeyProblem(
        _ connection: PostgresConnection, relation: Relation, key: [String]
    ) throws -> String? {
        let inserted = relation.insertedColumns
        let nulls = inserted.map { _ in "NULL" }.joined(separator: ", ")
        let sql = """
            EXPLAIN INSERT INTO \(schema).\(relation.name) (\(inserted.joined(separator: ", ")))
            VALUES (\(nulls)) ON CONFLICT (\(key.joined(separator: ", "))) DO NOTHING
            """
        try connection.query("SAVEPOINT data_contract")
        defer { _ = try? connection.query("RELEASE SAVEPOINT data_contract") }
        do {
            try connection.query(PostgresQuery(unsafeSQL: sql))
            return nil
        } catch {
            try connection.query("ROLLBACK TO SAVEPOINT data_contract")
            guard error.sqlState?.rawValue == "42P10" else {
                return "an INSERT … ON CONFLICT (\(key.joined(separator: ", "))) is refused: "
                    + (error.serverMessage ?? "\(error)")
            }
            return "no unique index on (\(key.joined(separator: ", "))), which recording relies on to record a dose "
                + "once: give the app's table a unique index on the columns these map to"
        }
    }

    /// Whether the planner, told not to scan whole tables, finds an index for a look-up by `lookup` with sample
    /// values (a look-up without one reads the app's whole table on every request).
    private func isServedByIndex(
        _ connection: PostgresConnection, _ relation: String, _ lookup: [String], _ types: [String: String]
    ) throws -> Bool {
        let conditions = lookup.map { column in
            let sample =
                switch types[column] ?? "" {
                case "uuid": "'00000000-0000-0000-0000-000000000000'"
                case "bytea": "'\\x00'::bytea"
                case "integer", "smallint", "bigint": "0"
                default: "'x'"
                }
            return "\(column) = \(sample)"
        }
        try connection.query("SET LOCAL enable_seqscan = off")
        defer { _ = try? connection.query("SET LOCAL enable_seqscan = on") }
        let plan = try connection.query(
            PostgresQuery(
                unsafeSQL:
                    "EXPLAIN SELECT 1 FROM \(schema).\(relation) WHERE \(conditions.joined(separator: " AND "))")
        ).map { try $0.decode(String.self, at: 0) }
        return !plan.contains { $0.contains("Seq Scan") }
    }
}
