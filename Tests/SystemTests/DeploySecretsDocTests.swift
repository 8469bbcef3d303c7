import Codecs
import CaregiverPush
import Foundation
import FunctionRuntime
import Testing
import TestFixtures
import TestSupport

/// The secrets docs/deploy.md tells a team to create ("From an empty account", step 5) go through the functions' own
/// parser as Lambda's extension would hand them over: each example marked `<!-- secret-example: FILE ARN_VARIABLE
/// accepted|refused -->` is read as its ARN variable's secret, and every `file://FILE` a documented `create-secret`
/// uploads has such an example.
@Suite("deploy.md's secret examples")
struct DeploySecretsDocTests {
    struct Example: CustomStringConvertible {
        let file: String
        let variable: String
        let accepted: Bool
        let text: String
        var description: String { file }
    }

    static func examples() throws -> [Example] {
        let text = try String(
            contentsOf: Repository.root.appendingPathComponent("docs/deploy.md"), encoding: .utf8)
        return text.matches(of: /<!-- secret-example: (\S+) ([A-Z_]+) (accepted|refused) -->\n```\w*\n([\s\S]*?)```/)
            .map {
                Example(
                    file: String($0.output.1), variable: String($0.output.2), accepted: $0.output.3 == "accepted",
                    text: String($0.output.4))
            }
    }

    /// The example as the parser gets it: what the extension returns for an ARN.
    static func resolve(_ example: Example) -> (environment: [String: String], errors: [ConfigurationError]) {
        let arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:x"
        return Configuration.resolvingSecrets(in: [example.variable: arn]) { _ in .success(example.text) }
    }

    @Test("every file a documented create-secret uploads has an example, and there is one of each secret")
    func everyUploadHasAnExample() throws {
        let text = try String(
            contentsOf: Repository.root.appendingPathComponent("docs/deploy.md"), encoding: .utf8)
        let uploaded = Set(
            text.matches(of: /create-secret[^\n]*\\\n[^\n]*--secret-string file:\/\/(\S+)/).map {
                String($0.output.1)
            })
        let examples = try Self.examples()
        #expect(uploaded.count == 4)
        #expect(uploaded.isSubset(of: Set(examples.map(\.file))), "uploaded \(uploaded), examples \(examples)")
        #expect(
            Set(examples.map(\.variable))
                == ["DATABASE_SECRET_ARN", "SUPABASE_JWT_SECRET_ARN", "FCM_SERVICE_ACCOUNT_SECRET_ARN"])
    }

    @Test("each example marked accepted gives a working configuration; each marked refused names its ARN variable")
    func examplesParse() throws {
        let examples = try Self.examples()
        #expect(examples.contains { !$0.accepted }, "the refused RDS-managed master secret is documented")
        for example in examples {
            let resolved = Self.resolve(example)
            guard example.accepted else {
                #expect(resolved.errors.map(\.variable) == [example.variable], "\(example)")
                #expect(!resolved.errors.description.contains("generated-by-rds"), "\(example): the value leaked")
                continue
            }
            #expect(resolved.errors.isEmpty, "\(example): \(resolved.errors)")
            let configuration = Configuration(environment: resolved.environment)
            switch example.variable {
            case "DATABASE_SECRET_ARN":
                let url = try #require(configuration.databaseURL, "\(example)")
                let document = try JSONValue.parse(example.text)
                let host = try #require(document["host"]?.stringValue)
                #expect(url.hasPrefix("postgresql://") && url.contains("@\(host):"), "\(example): \(url)")
            case "SUPABASE_JWT_SECRET_ARN":
                #expect(configuration.jwtSecret != nil, "\(example)")
                #expect(!configuration.errors.contains { $0.variable.hasPrefix("SUPABASE_JWT") }, "\(example)")
            case "FCM_SERVICE_ACCOUNT_SECRET_ARN":
                let account = try #require(try ServiceAccount.load(from: configuration), "\(example)")
                #expect(account.tokenURI == "https://oauth2.googleapis.com/token")
            default:
                Issue.record("\(example) names an unknown variable \(example.variable)")
            }
        }
    }
}
