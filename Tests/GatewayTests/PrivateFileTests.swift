import Foundation
import ProcessSupervision
import Testing
import TestSupport

/// The local stack's secrets (`.data/dev-jwt-secret`, the dev signing key) are readable by their owner only.
@Suite("Private files")
struct PrivateFileTests {
    private static func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    private static func scratch() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("private-file-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test("a new secret file is 0600, even under a permissive umask, and holds what was made")
    func createdPrivate() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let previous = umask(0)
        defer { umask(previous) }
        let path = directory + "/.data/dev-jwt-secret"
        let secret = try PrivateFile.readOrCreate(atPath: path) { "s3cret-made-once-0123456789abcdef" }
        #expect(secret == "s3cret-made-once-0123456789abcdef")
        #expect(try Self.mode(path) == 0o600)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == secret)
    }

    @Test("an existing secret is kept, and one left 0644 by an older version is made 0600")
    func existingMadePrivate() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/dev-jwt-secret"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("kept-secret-0123456789abcdef-0123".utf8)))
        #expect(chmod(path, 0o644) == 0)
        let secret = try PrivateFile.readOrCreate(atPath: path, isUsable: { $0.utf8.count >= 32 }) { "new" }
        #expect(secret == "kept-secret-0123456789abcdef-0123")
        #expect(try Self.mode(path) == 0o600)
    }

    @Test("a key file is never overwritten: create refuses an existing path")
    func createRefusesExisting() throws {
        let directory = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/key.pem"
        try PrivateFile.create(atPath: path, contents: Array("first".utf8))
        #expect(throws: POSIXError.self) { try PrivateFile.create(atPath: path, contents: Array("second".utf8)) }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "first")
        #expect(try Self.mode(path) == 0o600)
    }
}
