import ArgumentParser
import Foundation
import WebAuthnCore

/// Options that load FIDO metadata as trust anchors.
struct MetadataOptions: ParsableArguments {
    @Option(parsing: .unconditional, help: "FIDO metadata: an MDS3 BLOB JWT, its decoded payload JSON, a statement, or a folder of statements and payloads.")
    var metadata: String?

    @Option(name: .customLong("metadata-root"), parsing: .unconditional, help: "A PEM root for the BLOB's signing chain instead of the FIDO MDS root (e.g. the conformance tool's).")
    var metadataRoot: String?

    @Flag(name: .customLong("allow-stale-metadata"), help: "Accept a BLOB past its nextUpdate.")
    var allowStaleMetadata = false

    func load(at time: Date) throws -> FIDOMetadata? {
        guard let metadata else { return nil }
        var options = FIDOMetadata.BLOBOptions(refuseStale: !allowStaleMetadata)
        if let metadataRoot {
            guard let text = try? String(contentsOfFile: metadataRoot, encoding: .utf8) else { throw ValidationError("cannot read \(metadataRoot)") }
            do { options.roots = [try X509Certificate(pem: text)] } catch { throw ValidationError("--metadata-root: \(error.message)") }
        }
        do {
            return try FIDOMetadata.load(path: metadata, at: time, options: options)
        } catch {
            throw VerificationFailure(error: error)
        }
    }

    func anchors(at time: Date) throws -> TrustAnchors {
        var anchors = TrustAnchors.builtIn
        if let loaded = try load(at: time) { anchors.add(loaded.entries) }
        return anchors
    }
}

struct MetadataCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metadata", abstract: "Work with FIDO metadata (MDS3).", subcommands: [Inspect.self])

    struct Inspect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Verify and list the entries of FIDO metadata: AAGUID, name, attestation types, latest status.")

        @OptionGroup var trust: MetadataOptions
        @Option(parsing: .unconditional, help: "Verify as of this time (ISO 8601).") var at: String?

        mutating func validate() throws {
            guard trust.metadata != nil else { throw ValidationError("give --metadata PATH") }
            if let at, CommonVerifyOptions.parseDate(at) == nil { throw ValidationError("--at is not an ISO 8601 time") }
        }

        func run() async throws {
            let time = at.flatMap(CommonVerifyOptions.parseDate) ?? Date()
            guard let loaded = try trust.load(at: time) else { return }
            let iso = ISO8601DateFormatter()
            Output.print([
                "status": "ok",
                "no": loaded.serial.map { .number(Double($0)) } ?? .null,
                "nextUpdate": loaded.nextUpdate.map { .string(iso.string(from: $0)) } ?? .null,
                "skipped": .number(Double(loaded.skipped)),
                "entries": .array(loaded.entries.map { entry in
                    [
                        "aaguid": entry.aaguid.map { .string($0.description) } ?? .null,
                        "attestationCertificateKeyIdentifiers": .array(entry.attestationCertificateKeyIdentifiers.map { .string($0) }),
                        "description": .string(entry.description),
                        "attestationTypes": .array(entry.attestationTypes.map { .string($0) }),
                        "status": entry.status.map { .string($0.rawValue) } ?? .null,
                        "roots": .number(Double(entry.attestationRootCertificates.count)),
                    ]
                }),
            ])
        }
    }
}
