import ProcessSupervision
import CaregiverPush
import Foundation
import Testing
import TestFixtures
import TestSupport

/// `infra/functions.json`: routes, schedules and what the table refuses.
@Suite("function table")
struct FunctionTableTests {
    @Test(
        "rate(…) in EventBridge's grammar gives its interval",
        arguments: [
            ("rate(1 minute)", 60), ("rate(5 minutes)", 300), ("rate(1 hour)", 3600), ("rate(2 hours)", 7200),
            ("rate(1 day)", 86_400), ("rate(7 days)", 604_800), ("rate(90 minutes)", 5400),
        ])
    func rates(expression: String, seconds: Int) throws {
        #expect(try FunctionTable.rate(expression) == .seconds(seconds))
    }

    @Test(
        "anything but rate(N unit) with the unit's right number is refused",
        arguments: [
            "rate(1 minutes)", "rate(2 minute)", "rate(0 minutes)", "rate(-1 minutes)", "rate(+5 minutes)",
            "rate(05 minutes)", "rate(1.5 hours)", "rate(5 seconds)", "rate(5 Minutes)", "rate(5  minutes)",
            "rate( 5 minutes)", "rate(5 minutes )", "rate(5minutes)", "rate(5 minutes", "rate 5 minutes", "rate()",
            "", "5 minutes", "rate(99999999999999999999 days)", "rate(9223372036854775807 days)", "rate(١ minute)",
        ])
    func refusedRates(expression: String) {
        #expect(throws: FunctionTableError.unsupportedSchedule(function: nil, schedule: expression)) {
            try FunctionTable.rate(expression)
        }
    }

    @Test("cron is refused with an error that says the runner does not support it")
    func cron() {
        let error = #expect(throws: FunctionTableError.self) {
            try FunctionTable(json: Self.table([Self.scheduled("push-sweep", "cron(0/5 * * * ? *)")]))
        }
        #expect(error == .unsupportedSchedule(function: "push-sweep", schedule: "cron(0/5 * * * ? *)"))
        #expect(error?.description.contains("cron expressions are not supported") == true)
    }

    @Test("the repository's table: five routed functions, push-sweep every minute, db-migrate at deploy time")
    func repositoryTable() throws {
        let table = try FunctionTable(
            contentsOf: Repository.root.appendingPathComponent("infra/functions.json"))
        let sweep = try #require(table.function(named: "push-sweep"))
        #expect(sweep.rate == .seconds(60) && sweep.routeKey == nil && sweep.method == nil && sweep.path == nil)
        #expect(sweep.timeoutSeconds == 90)
        let routed = table.functions.filter { $0.routeKey != nil }
        #expect(routed.count == 5 && routed.allSatisfy { $0.rate == nil })
        #expect(table.function(named: "dose-record")?.routeKey == "POST /api/dose-records")
        let migrate = try #require(table.function(named: "db-migrate"))
        #expect(migrate.deploy == "customResource" && migrate.routeKey == nil && migrate.rate == nil)
    }

    @Test("several scheduled functions are not a duplicate route; two functions on one route still are")
    func duplicates() throws {
        let table = try FunctionTable(
            json: Self.table([
                Self.scheduled("a", "rate(1 minute)"), Self.scheduled("b", "rate(2 minutes)"), Self.routed("c", "/c"),
            ]))
        #expect(table.functions.map(\.rate) == [.seconds(60), .seconds(120), nil])
        #expect(throws: FunctionTableError.duplicate) {
            try FunctionTable(json: Self.table([Self.routed("a", "/same"), Self.routed("b", "/same")]))
        }
        #expect(throws: FunctionTableError.duplicate) {
            try FunctionTable(
                json: Self.table([Self.scheduled("a", "rate(1 minute)"), Self.scheduled("a", "rate(1 minute)")]))
        }
    }

    @Test("a function needs exactly one trigger: a whole route, a schedule or deploy")
    func triggers() {
        let limits = #""timeoutSeconds": 5, "memoryMB": 128, "concurrency": 1"#
        let cases: [(String, FunctionTableError)] = [
            (#"{"name": "x", \#(limits)}"#, .noTrigger(function: "x")),
            (
                #"{"name": "x", "method": "POST", "path": "/x", "schedule": "rate(1 minute)", \#(limits)}"#,
                .routeAndSchedule(function: "x")
            ),
            (#"{"name": "x", "method": "POST", \#(limits)}"#, .incompleteRoute(function: "x")),
            (
                #"{"name": "x", "path": "/x", "schedule": "rate(1 minute)", \#(limits)}"#,
                .incompleteRoute(function: "x")
            ),
            (
                #"{"name": "x", "deploy": "customResource", "method": "POST", "path": "/x", \#(limits)}"#,
                .deployAndTrigger(function: "x")
            ),
            (
                #"{"name": "x", "deploy": "customResource", "schedule": "rate(1 minute)", \#(limits)}"#,
                .deployAndTrigger(function: "x")
            ),
            (#"{"name": "x", "deploy": "customResource", "path": "/x", \#(limits)}"#, .deployAndTrigger(function: "x")),
            (
                #"{"name": "x", "deploy": "onEveryPush", \#(limits)}"#,
                .unsupportedDeploy(function: "x", deploy: "onEveryPush")
            ),
        ]
        for (function, expected) in cases {
            #expect(throws: expected) { try FunctionTable(json: Self.table([function])) }
        }
        let deployOnly = try? FunctionTable(
            json: Self.table([#"{"name": "x", "deploy": "customResource", \#(limits)}"#]))
        #expect(deployOnly?.functions.first.map { $0.routeKey == nil && $0.rate == nil } == true)
    }

    @Test("maxBodyBytes is optional (16 KiB by default) and must be 1 to 1 MiB")
    func bodyLimits() throws {
        let sized =
            #"{"name": "a", "method": "POST", "path": "/a", "timeoutSeconds": 5, "memoryMB": 128, "concurrency": 1, "#
        let table = try FunctionTable(
            json: Self.table([sized + #""maxBodyBytes": 100}"#, Self.routed("b", "/b")]))
        #expect(table.function(named: "a")?.bodyLimit == 100)
        #expect(table.function(named: "b")?.bodyLimit == 16_384)
        for bad in [0, 1024 * 1024 + 1] {
            #expect(throws: FunctionTableError.bodyLimit(function: "a", bytes: bad)) {
                try FunctionTable(json: Self.table([sized + #""maxBodyBytes": \#(bad)}"#]))
            }
        }
        let shipped = try FunctionTable(
            contentsOf: Repository.root.appendingPathComponent("infra/functions.json"))
        #expect(shipped.functions.allSatisfy { $0.bodyLimit == FunctionTable.defaultMaxBodyBytes })
    }

    static func table(_ functions: [String]) -> Data {
        Data(#"{"functions": [\#(functions.joined(separator: ","))]}"#.utf8)
    }

    static func scheduled(_ name: String, _ schedule: String) -> String {
        #"{"name": "\#(name)", "schedule": "\#(schedule)", "timeoutSeconds": 5, "memoryMB": 128, "concurrency": 1}"#
    }

    static func routed(_ name: String, _ path: String) -> String {
        #"{"name": "\#(name)", "method": "POST", "path": "\#(path)", "timeoutSeconds": 5, "memoryMB": 128, "concurrency": 1}"#
    }
}
