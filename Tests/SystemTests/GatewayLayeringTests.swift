import Foundation
import Testing
import TestFixtures
import TestSupport

/// The production gateway (Gateway/) is apart from the domain and the developer's tools: the image ships it, so it
/// must not carry the FCM emulator, token minting or the domain's code. SwiftPM lets a target import any module the
/// build happens to have made, so the sources' imports are read here rather than trusted to the manifest.
@Suite("the gateway imports none of the domain or the developer's tools")
struct GatewayLayeringTests {
    static func imports(in folder: String) throws -> [String: Set<String>] {
        let directory = Repository.root.appendingPathComponent(folder)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter {
            $0.hasSuffix(".swift")
        }
        var result: [String: Set<String>] = [:]
        for file in files {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            result[file] = Set(
                text.split(separator: "\n").compactMap { line in
                    line.wholeMatch(of: /(?:@\w+ )*import (\w+)/).map { String($0.1) }
                })
        }
        return result
    }

    @Test(
        "FunctionGateway imports no CaregiverPush, JOSE, Libpq, Migrations, FCMEmulator or ArgumentParser",
        arguments: ["Gateway/FunctionGateway"])
    func functionGateway(folder: String) throws {
        let forbidden: Set = ["CaregiverPush", "JOSE", "Libpq", "Migrations", "FCMEmulator", "ArgumentParser"]
        let imports = try Self.imports(in: folder)
        #expect(imports.count >= 20, "\(folder) holds \(imports.count) Swift files")
        for (file, modules) in imports {
            #expect(modules.isDisjoint(with: forbidden), "\(folder)/\(file) imports \(modules.intersection(forbidden))")
        }
    }

    @Test(
        "the gateway's commands import no CaregiverPush, JOSE or FCMEmulator",
        arguments: ["Gateway/GatewayCommands", "Gateway/GatewayCommand"])
    func gatewayCommands(folder: String) throws {
        let forbidden: Set = ["CaregiverPush", "JOSE", "FCMEmulator"]
        let imports = try Self.imports(in: folder)
        #expect(!imports.isEmpty, "\(folder) holds no Swift file")
        for (file, modules) in imports {
            #expect(modules.isDisjoint(with: forbidden), "\(folder)/\(file) imports \(modules.intersection(forbidden))")
        }
    }

    @Test("Package.swift declares none of them for FunctionGateway, GatewayCommands or GatewayCommand")
    func manifestDependencies() throws {
        let manifest = try String(
            contentsOf: Repository.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        for target in ["FunctionGateway", "GatewayCommands", "GatewayCommand"] {
            // The target's declaration, up to its path.
            let start = try #require(manifest.range(of: "name: \"\(target)\","), "no target \(target)")
            let end = try #require(manifest.range(of: "path:", range: start.upperBound..<manifest.endIndex))
            let declaration = manifest[start.upperBound..<end.lowerBound]
            for module in ["\"CaregiverPush\"", "\"JOSE\"", "\"FCMEmulator\""] {
                #expect(!declaration.contains(module), "\(target) depends on \(module)")
            }
            if target == "FunctionGateway" {
                for module in ["\"Libpq\"", "\"Migrations\"", "swift-argument-parser"] {
                    #expect(!declaration.contains(module), "\(target) depends on \(module)")
                }
            }
        }
    }
}
