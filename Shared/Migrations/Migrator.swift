import Libpq
import FoundationEssentials
import Logging

/// Applies `infra/migrations/NNNNNN_name.up.sql` in order, each once, recording them in `caregiver_push.schema_migrations`.
///
/// Everything happens in one transaction holding an `EXCLUSIVE` lock on the history table (``serialize(_:)``), so
/// two migrators started together apply each migration exactly once (the second waits, then finds nothing to do), and a failing migration
/// leaves the database as it was.
public struct Migrator: Sendable {
    /// One migration file.
    public struct Migration: Sendable, Equatable {
        public let version: String
        public let name: String
        public let sql: String
    }

    /// The advisory lock key of the very first run, before the history table exists: an arbitrary constant.
    static let lockKey = 7_301_202_611

    public let migrations: [Migration]
    /// The data contract beside the migrations (`data-contract.json`), checked after every run; `nil` for a directory
    /// without one (a test's own migrations).
    public let contract: DataContract?
    /// The operator's mapping of the household relations onto the app's own tables (docs/deploy.md#bring-your-own-
    /// tables): `app-mapping.sql` beside the migrations, or the file `gateway migrate --app-mapping` names.
    public let appMapping: String?

    /// The mapping's file name, beside the migrations.
    public static let appMappingFileName = "app-mapping.sql"

    /// Reads the migrations of a directory, its data contract and its app mapping, when it has them.
    /// - Parameter appMapping: the mapping's text, instead of the directory's `app-mapping.sql`.
    /// - Throws: when the directory cannot be read or a file name is not `NNNNNN_name.up.sql`.
    public init(directory: URL, appMapping: String? = nil) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasSuffix(".up.sql")
        }
        var migrations: [Migration] = []
        for fileName in names.sorted() {
            let stem = fileName.dropLast(".up.sql".count)
            let parts = stem.split(separator: "_", maxSplits: 1)
            guard parts.count == 2, parts[0].count == 6, parts[0].allSatisfy(\.isASCII), Int(parts[0]) != nil else {
                throw MigrationError.badFileName(fileName)
            }
            let sql = try String(contentsOf: directory.appendingPathComponent(fileName), encoding: .utf8)
            migrations.append(Migration(version: String(parts[0]), name: String(parts[1]), sql: sql))
        }
        guard Set(migrations.map(\.version)).count == migrations.count else { throw MigrationError.duplicateVersion }
        self.migrations = migrations
        let contractFile = directory.appendingPathComponent(DataContract.fileName)
        contract =
            FileManager.default.fileExists(atPath: contractFile.path)
            ? try DataContract.load(directory: directory) : nil
        let mappingFile = directory.appendingPathComponent(Self.appMappingFileName)
        self.appMapping =
            try appMapping
            ?? (FileManager.default.fileExists(atPath: mappingFile.path)
                ? String(contentsOf: mappingFile, encoding: .utf8) : nil)
        if self.appMapping != nil, contract == nil { throw MigrationError.mappingWithoutContract }
    }

    /// Makes concurrent migrators take turns, with a lock no other role can hold: the history table, locked
    /// `EXCLUSIVE`, which needs rights on it that only its owner has (the runtime role, whose password every function
    /// holds, could take any advisory lock and fail a deploy by holding it). Before the first migration there is no
    /// table yet, and no role but the owner can log in: an advisory lock serialises that first run.
    private func serialize(_ connection: PostgresConnection) throws {
        let exists = try connection.query(
            "SELECT to_regclass('caregiver_push.schema_migrations') IS NOT NULL"
        )[0].decode(Bool.self, at: 0)
        if exists {
            try connection.query("LOCK TABLE caregiver_push.schema_migrations IN EXCLUSIVE MODE")
        } else {
            try connection.query("SELECT pg_advisory_xact_lock(\(Self.lockKey))")
        }
    }

    /// Applies what has not been applied yet, then closes the schema (``lockdown``).
    ///
    /// Every migration runs with `search_path` pinned to ``schema`` (then `pg_temp`), so the files name their tables
    /// unqualified and create them there; the history lives in `caregiver_push.schema_migrations`. A database that an
    /// earlier version migrated has its history in `public.schema_migrations`: it is moved into the schema first
    /// (``adoptLegacyHistory``), and migration 000004 moves the tables.
    /// - Returns: the versions applied by this call, in order.
    @discardableResult
    public func migrate(_ connection: PostgresConnection, logger: Logger) throws -> [String] {
        try connection.withTransaction { connection in
            try serialize(connection)
            try connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(Self.schema)"))
            try connection.query("SELECT set_config('search_path', \(Self.schema + ", pg_temp"), true)")
            try adoptLegacyHistory(connection, logger: logger)
            try connection.query(
                """
                CREATE TABLE IF NOT EXISTS caregiver_push.schema_migrations (
                    version text PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                """)
            let applied = Set(
                try connection.query("SELECT version FROM caregiver_push.schema_migrations").map {
                    try $0.decode(String.self, at: 0)
                })
            var newlyApplied: [String] = []
            for migration in migrations where !applied.contains(migration.version) {
                logger.info(
                    "applying migration",
                    metadata: [
                        "migration.version": .string(migration.version),
                        "migration.name": .string(migration.name),
                    ])
                try connection.executeScript(PostgresQuery(unsafeSQL: migration.sql))
                try connection.query(
                    """
                    INSERT INTO caregiver_push.schema_migrations (version, name)
                    VALUES (\(migration.version), \(migration.name))
                    """)
                newlyApplied.append(migration.version)
            }
            if let contract {
                let mapping = appMapping.map { AppMapping(contract: contract, sql: $0) }
                try mapping?.apply(connection, logger: logger)
                let violations = try contract.violations(connection)
                guard violations.isEmpty else { throw MigrationError.contractViolated(violations) }
                try mapping?.grantContractColumns(connection)
            }
            try connection.executeScript(PostgresQuery(unsafeSQL: Self.lockdown))
            return newlyApplied
        }
    }

    /// Moves an earlier version's history table from `public` into the schema, once. It is ours when it has this
    /// migrator's columns and names the first migration `initial_schema`; any other `public.schema_migrations`
    /// (another tool's) is left alone.
    private func adoptLegacyHistory(_ connection: PostgresConnection, logger: Logger) throws {
        let legacy = try connection.query(
            """
            SELECT to_regclass('caregiver_push.schema_migrations') IS NULL
               AND to_regclass('public.schema_migrations') IS NOT NULL
               AND (SELECT array_agg(attname::text ORDER BY attnum) FROM pg_catalog.pg_attribute
                    WHERE attrelid = to_regclass('public.schema_migrations') AND attnum > 0 AND NOT attisdropped)
                   = ARRAY['version', 'name', 'applied_at']
            """
        )[0].decode(Bool.self, at: 0)
        guard legacy,
            try connection.query(
                "SELECT 1 FROM public.schema_migrations WHERE version = '000001' AND name = 'initial_schema'"
            ).single != nil
        else { return }
        logger.info("moving the migration history into its schema", metadata: ["migration.schema": "\(Self.schema)"])
        try connection.query("ALTER TABLE public.schema_migrations SET SCHEMA caregiver_push")
    }

    /// The project's schema: every object the migrations make lives here.
    public static let schema = "caregiver_push"
    /// The role the functions, the sweep and the gateway connect as (created by migration 000005, without LOGIN).
    public static let runtimeRole = "caregiver_push_runtime"

    /// Run after every migration run, whatever the migrations did: the schema is closed to everyone but its owner and
    /// the runtime role's policies, so that a table a later migration forgets to close is closed all the same, and a
    /// project that exposes this schema through Supabase's Data API by mistake still exposes nothing.
    /// - PUBLIC and Supabase's API roles (`anon`, `authenticated`, `service_role`, where they exist) lose every
    ///   privilege on the schema and everything in it, and the schema's default privileges grant them nothing;
    /// - every role's default privileges in the schema are taken back, not only the migrator's own (the migrator
    ///   must be a member of a role to change its defaults; it says so and fails otherwise);
    /// - row level security is enabled and forced on every table; the table's owner gets a policy of its own (a
    ///   superuser or a `BYPASSRLS` owner needs none), so that later data migrations still see the rows;
    /// - every table refuses TRUNCATE by anyone but its owner (`refuse_truncate`, migration 000015), which row level
    ///   security does not cover, so that a grant made between two lockdowns cannot empty a table.
    ///
    /// It changes only what is open: on a closed schema it takes no lock (`ALTER TABLE … ROW LEVEL SECURITY` takes an
    /// ACCESS EXCLUSIVE lock on the table, which a migrator run on every deploy must not take for nothing).
    static let lockdown = """
        DO $lockdown$
        DECLARE
            outsiders text;
            outsider_oids oid[];
            kind text;
            def record;
            rel record;
        BEGIN
            SELECT 'PUBLIC' || coalesce(', ' || string_agg(quote_ident(rolname), ', '), ''),
                   array_append(coalesce(array_agg(oid), '{}'), 0::oid)
            INTO outsiders, outsider_oids
            FROM pg_catalog.pg_roles WHERE rolname IN ('anon', 'authenticated', 'service_role');
            IF EXISTS (
                SELECT 1 FROM pg_catalog.pg_namespace n,
                    aclexplode(coalesce(n.nspacl, acldefault('n'::"char", n.nspowner))) a
                WHERE n.nspname = 'caregiver_push' AND a.grantee = ANY (outsider_oids)
            ) OR EXISTS (
                SELECT 1 FROM pg_catalog.pg_class c,
                    aclexplode(coalesce(c.relacl, acldefault((CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END)::"char", c.relowner))) a
                WHERE c.relnamespace = 'caregiver_push'::regnamespace AND a.grantee = ANY (outsider_oids)
            ) OR EXISTS (
                SELECT 1 FROM pg_catalog.pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f'::"char", p.proowner))) a
                WHERE p.pronamespace = 'caregiver_push'::regnamespace AND a.grantee = ANY (outsider_oids)
            ) OR EXISTS (
                SELECT 1 FROM pg_catalog.pg_default_acl d, aclexplode(d.defaclacl) a
                WHERE d.defaclnamespace = 'caregiver_push'::regnamespace AND a.grantee = ANY (outsider_oids)
            ) THEN
                EXECUTE format('REVOKE ALL ON SCHEMA caregiver_push FROM %s', outsiders);
                FOREACH kind IN ARRAY ARRAY['TABLES', 'SEQUENCES', 'ROUTINES'] LOOP
                    EXECUTE format('REVOKE ALL ON ALL %s IN SCHEMA caregiver_push FROM %s', kind, outsiders);
                END LOOP;
                -- Every role's defaults in the schema, not only the migrator's own (Supabase's steps name
                -- FOR ROLE postgres): the migrator must be a member of that role to take them back.
                FOR def IN
                    SELECT DISTINCT d.defaclrole::regrole AS grantor,
                        CASE d.defaclobjtype WHEN 'r' THEN 'TABLES' WHEN 'S' THEN 'SEQUENCES'
                            WHEN 'f' THEN 'FUNCTIONS' WHEN 'T' THEN 'TYPES' END AS kind
                    FROM pg_catalog.pg_default_acl d, aclexplode(d.defaclacl) a
                    WHERE d.defaclnamespace = 'caregiver_push'::regnamespace AND a.grantee = ANY (outsider_oids)
                LOOP
                    BEGIN
                        EXECUTE format(
                            'ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA caregiver_push REVOKE ALL ON %s FROM %s',
                            def.grantor, def.kind, outsiders);
                    EXCEPTION WHEN insufficient_privilege THEN
                        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
                            MESSAGE = format('the role %s grants the Data API roles its new %s in caregiver_push, '
                                'and the migrator is not a member of it to take that back: as %s, run ALTER DEFAULT '
                                'PRIVILEGES FOR ROLE %s IN SCHEMA caregiver_push REVOKE ALL ON %s FROM %s',
                                def.grantor, lower(def.kind), def.grantor, def.grantor, def.kind, outsiders);
                    END;
                END LOOP;
            END IF;
            FOR rel IN
                SELECT c.oid::regclass AS name, c.relowner::regrole AS owner,
                       c.relrowsecurity AND c.relforcerowsecurity AS closed
                FROM pg_catalog.pg_class c
                WHERE c.relnamespace = 'caregiver_push'::regnamespace AND c.relkind IN ('r', 'p')
            LOOP
                IF NOT rel.closed THEN
                    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY', rel.name);
                END IF;
                IF NOT EXISTS (
                    SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = rel.name AND tgname = 'caregiver_push_no_truncate'
                ) AND to_regprocedure('caregiver_push.refuse_truncate()') IS NOT NULL THEN
                    EXECUTE format(
                        'CREATE TRIGGER caregiver_push_no_truncate BEFORE TRUNCATE ON %s '
                        'FOR EACH STATEMENT EXECUTE FUNCTION caregiver_push.refuse_truncate()', rel.name);
                END IF;
                IF NOT EXISTS (
                    SELECT 1 FROM pg_catalog.pg_policy WHERE polrelid = rel.name AND polname = 'caregiver_push_owner'
                ) THEN
                    EXECUTE format(
                        'CREATE POLICY caregiver_push_owner ON %s TO %s USING (true) WITH CHECK (true)',
                        rel.name, rel.owner);
                END IF;
            END LOOP;
        END
        $lockdown$
        """
}

public enum MigrationError: Error, CustomStringConvertible {
    case badFileName(String)
    case duplicateVersion
    case mappingWithoutContract
    /// The schema, as migrated and mapped, breaks the data contract: each violation names its relation and column.
    case contractViolated([String])
    /// The mapping would replace a household table of the functions' own that still holds rows.
    case householdTableNotEmpty(String)

    public var description: String {
        switch self {
        case .badFileName(let name): "migration file \(name) is not named NNNNNN_name.up.sql"
        case .duplicateVersion: "two migration files share a version number"
        case .mappingWithoutContract:
            "an app mapping needs the data contract (\(DataContract.fileName)) beside the migrations"
        case .contractViolated(let violations):
            "the schema breaks the data contract (docs/behaviour.md#data-contract); nothing was applied: "
                + violations.joined(separator: "; ")
        case .householdTableNotEmpty(let table):
            "\(table) holds rows: the app mapping replaces it with the app's own table, so move its rows to the app's "
                + "tables first; nothing was applied"
        }
    }
}
