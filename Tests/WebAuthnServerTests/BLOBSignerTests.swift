import Foundation
import Testing
import WebAuthnCore
import WebAuthnMetadata
import WebAuthnTesting
import _WebAuthnEncoding
import _WebAuthnCrypto

/// Who may sign a metadata BLOB. The FIDO MDS roots (GlobalSign Root R46 since 2026-08-21, Root
/// CA - R3 before) are public TLS roots: under them only a certificate issued to
/// `mds.fidoalliance.org` signs BLOBs. Red team, twelfth pass: any certificate under the root
/// signed a BLOB that made a self-made attestation chain `trusted`.
@Suite("Metadata BLOB signer")
struct BLOBSignerTests {
    static let pki = MDSTestPKI.shared

    /// A BLOB signing certificate under the test PKI's intermediate, with these DNS names.
    static func signer(serial: UInt64, names: [String], commonName: String? = nil) throws -> (certificate: X509Certificate, key: SigningKey) {
        let key = try SigningKey.generate(.rs256)
        var builder = CertificateBuilder(subject: [("C", "AA"), ("O", "metadata stand-in"), ("CN", commonName ?? names.first ?? "www.attacker.example")])
        builder.serial = serial
        var san: [UInt8] = []
        for name in names { san += [0x82, UInt8(name.utf8.count)] + Array(name.utf8) }
        builder.extensions = [(X509Certificate.OID.basicConstraints, true, DERWriter.basicConstraintsCAFalse)]
        if !names.isEmpty { builder.extensions.append((X509Certificate.OID.subjectAltName, false, [0x30, UInt8(san.count)] + san)) }
        return (try builder.build(key: key, issuer: pki.intermediate, issuerKey: pki.intermediateKey), key)
    }

    @Test("the default roots are R46 and R3, and under them the signer must be issued to mds.fidoalliance.org; under a root of one's own, any signer it issued")
    func signerName() throws {
        let defaults = FIDOMetadata.BLOBOptions()
        #expect(
            defaults.roots.map(\.fingerprint) == [
                "4fa3126d8d3a11d1c4855a4f807cbad6cf919d3a5a88b03bea2c6372d93c40c9", "cbb522d7b7f127ad6a0113865bdf1cd4102e7d0759af635a7cf4720dc963c53b",
            ])
        #expect(defaults.signerName == "mds.fidoalliance.org")
        #expect(FIDOMetadata.BLOBOptions(roots: [FIDOMetadata.BLOBOptions.fidoMDSRootR46]).signerName == "mds.fidoalliance.org")
        #expect(FIDOMetadata.BLOBOptions(roots: [FIDOMetadata.BLOBOptions.fidoMDSRoot]).signerName == "mds.fidoalliance.org")
        #expect(Self.pki.options.signerName == nil, "a root of one's own signs through whatever it issued")
        // Roots set afterwards (as --metadata-root and --mds-root do) set the name for them.
        var replaced = FIDOMetadata.BLOBOptions()
        replaced.roots = [Self.pki.root]
        #expect(replaced.signerName == nil)
        replaced.roots = [FIDOMetadata.BLOBOptions.fidoMDSRootR46.x509]
        #expect(replaced.signerName == "mds.fidoalliance.org")

        // Under a root that also issues TLS certificates for other sites (as GlobalSign's do).
        var options = Self.pki.options
        options.signerName = FIDOMetadata.BLOBOptions.fidoMDSSignerName
        let now = MetadataServiceTests.now
        // Wildcards and a name in the common name only do not count (red team, twelfth pass: any
        // wildcard or CDN certificate for the domain would have signed BLOBs).
        for names in [
            [], ["www.attacker.example"], ["mds.fidoalliance.org.attacker.example"], ["xmds.fidoalliance.org"], ["*.fidoalliance.org"], ["m*.fidoalliance.org"],
        ] {
            let forged = try Self.pki.blob(no: 5, signedBy: try Self.signer(serial: 31, names: names))
            do {
                _ = try FIDOMetadata.blob(jwt: forged, at: now, options: options)
                Issue.record("a BLOB signed for \(names) verified")
            } catch {
                #expect(error.code == .metadataUntrusted && error.message.contains("not issued to mds.fidoalliance.org"), "\(error.message)")
            }
        }
        let commonNameOnly = try Self.pki.blob(no: 5, signedBy: try Self.signer(serial: 34, names: [], commonName: "mds.fidoalliance.org"))
        #expect(throws: WebAuthnError.self, "the name in the common name only") { try FIDOMetadata.blob(jwt: commonNameOnly, at: now, options: options) }
        // The same BLOB from a certificate issued to the name verifies, also with another name beside it.
        for names in [["mds.fidoalliance.org"], ["fidoalliance.org", "mds.fidoalliance.org"]] {
            let genuine = try Self.pki.blob(no: 6, signedBy: try Self.signer(serial: 32, names: names))
            #expect(try FIDOMetadata.blob(jwt: genuine, at: now, options: options).serial == 6, "\(names)")
        }
        // Without the name (a root of one's own), the first one verifies: the root is the signer's trust.
        let own = try Self.pki.blob(no: 7, signedBy: try Self.signer(serial: 33, names: ["www.attacker.example"]))
        #expect(try FIDOMetadata.blob(jwt: own, at: now, options: Self.pki.options).serial == 7)
    }

    @Test("a signed BLOB without no or nextUpdate, or with a critical header parameter, is refused")
    func blobNeedsNumberAndNextUpdate() async throws {
        // Red team, sixteenth pass: read as absent, they turned the rollback and staleness checks off.
        let pki = Self.pki
        for payload: JSONValue in [["nextUpdate": "2099-01-01", "entries": []], ["no": 3, "entries": []], ["entries": []]] {
            let jws = try JWSWriter.compact(payload, key: pki.signer.key, x5c: [pki.signer.certificate, pki.intermediate], type: "JWT")
            #expect(await errorCode { _ = try FIDOMetadata.blob(jwt: jws, at: MetadataServiceTests.now, options: pki.options) } == "metadata_invalid")
        }
        // A critical header parameter is refused (RFC 7515 §4.1.11; red team, sixteenth pass: ignored).
        let critical = try JWSWriter.compact(
            ["no": 3, "nextUpdate": "2099-01-01", "entries": []], key: pki.signer.key, x5c: [pki.signer.certificate, pki.intermediate], type: "JWT",
            extraHeader: ["crit": ["exp"], "exp": 1])
        #expect(await errorCode { _ = try FIDOMetadata.blob(jwt: critical, at: MetadataServiceTests.now, options: pki.options) } == "metadata_invalid")
        let whole = try JWSWriter.compact(
            ["no": 3, "nextUpdate": "2099-01-01", "entries": []], key: pki.signer.key, x5c: [pki.signer.certificate, pki.intermediate], type: "JWT")
        #expect(try FIDOMetadata.blob(jwt: whole, at: MetadataServiceTests.now, options: pki.options).serial == 3)
    }
}
