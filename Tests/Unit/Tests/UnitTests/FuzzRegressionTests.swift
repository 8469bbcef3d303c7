import Foundation
import Testing

@testable import CaregiverPush
import TestFixtures

/// Replays every fuzz seed (`Tests/Fuzz/Corpus/<target>/`) and every input a fuzz run found
/// (`Tests/Fuzz/Regressions/<target>/`) through the checks the libFuzzer harnesses run (`Fuzz/FuzzChecks.swift`,
/// the same file), so `swift test` keeps each fixed bug fixed without libFuzzer or a database.
@Suite("fuzz regressions")
struct FuzzRegressionTests {
    @Test("every envelope seed and regression input gets a well-formed response of an expected status")
    func envelope() {
        replay("envelope") { input throws(InvariantViolation) in try EnvelopeCheck.check(input) }
    }

    @Test("every validators seed and regression input is accepted soundly or refused with 400/413/415/422")
    func validators() {
        replay("validators") { input throws(InvariantViolation) in try ValidatorCheck.check(input) }
    }

    @Test("every token seed and regression input is verified consistently; only genuinely valid ones pass")
    func tokenVerifier() throws {
        let check = try TokenCheck(jwksJSON: String(contentsOf: FuzzInputs.jwksFile, encoding: .utf8))
        replay("token-verifier") { input throws(InvariantViolation) in try check.check(input) }
        // The seeds only steer the fuzzer well while they still verify against Keys/jwks.json.
        for file in FuzzInputs.files(in: FuzzInputs.corpus("token-verifier")) {
            let accepted = (try? check.verify(Array(Data(contentsOf: file))).get()) != nil
            let name = file.lastPathComponent
            if name.hasPrefix("valid-") { #expect(accepted, "\(name) should verify") }
            if name.hasPrefix("rejected-") { #expect(!accepted, "\(name) should be rejected") }
        }
    }

    /// Runs `check` on every file of the target's corpus and regressions; each violation is an issue naming the file.
    private func replay(
        _ target: String, sourceLocation: SourceLocation = #_sourceLocation,
        _ check: ([UInt8]) throws(InvariantViolation) -> Void
    ) {
        let corpus = FuzzInputs.files(in: FuzzInputs.corpus(target))
        let regressions = FuzzInputs.files(in: FuzzInputs.regressions(target))
        // Empty directories would make this test pass without checking anything.
        #expect(!corpus.isEmpty, "no seeds in Tests/Fuzz/Corpus/\(target)", sourceLocation: sourceLocation)
        #expect(!regressions.isEmpty, "no inputs in Tests/Fuzz/Regressions/\(target)", sourceLocation: sourceLocation)
        for file in corpus + regressions {
            let input: [UInt8]
            do {
                input = Array(try Data(contentsOf: file))
            } catch {
                Issue.record("\(file.path): unreadable", sourceLocation: sourceLocation)
                continue
            }
            do {
                try check(input)
            } catch {
                let place = "\(file.deletingLastPathComponent().lastPathComponent)/\(file.lastPathComponent)"
                Issue.record("\(target) \(place): \(error)", sourceLocation: sourceLocation)
            }
        }
    }
}

/// Where the fuzz package keeps its inputs, found from this file's path (the tests run from a source checkout).
enum FuzzInputs {
    /// `Tests/Fuzz`.
    static let root = Repository.root.appendingPathComponent("Tests/Fuzz")
    static var jwksFile: URL { FuzzFixture.jwksFile(fuzzPackageRoot: root) }

    static func corpus(_ target: String) -> URL { root.appendingPathComponent("Corpus/\(target)") }
    static func regressions(_ target: String) -> URL { root.appendingPathComponent("Regressions/\(target)") }

    /// The directory's files, sorted, without hidden ones; none when it does not exist.
    static func files(in directory: URL) -> [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { directory.appendingPathComponent($0) }
    }
}
