internal import Foundation
internal import _WebAuthnCrypto
#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Writing a file so that readers see the old contents or the new, never a part: a new
/// temporary file in the same folder (created exclusively), written in full and synced,
/// then renamed over the old one. And reading one with a bound.
package enum AtomicFile {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The contents of the regular file at `path` when it holds at most `limit` bytes; nil when it
    /// cannot be opened, is not a regular file (a device or a FIFO never ends), or is larger: no more
    /// than `limit + 1` bytes are read, whatever its size (a 3 GB file given as a CRL was read
    /// whole, into 6 GB, before its size was checked).
    package static func read(_ path: String, limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, status.st_size >= 0, status.st_size <= limit else { return nil }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while bytes.count <= limit {
            let wanted = min(chunk.count, limit + 1 - bytes.count)
            let n = chunk.withUnsafeMutableBytes { buffer in systemRead(fd, buffer.baseAddress, wanted) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[..<n])
        }
        return bytes.count <= limit ? bytes : nil
    }

    private static func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
        #if canImport(Glibc)
            Glibc.read(fd, buffer, count)
        #elseif canImport(Musl)
            Musl.read(fd, buffer, count)
        #else
            Darwin.read(fd, buffer, count)
        #endif
    }

    static func save(_ bytes: [UInt8], to path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        let temporary = (directory as NSString).appendingPathComponent(".\(name).\(SecureRandom.bytes(8).map { String(format: "%02x", $0) }.joined()).tmp")
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw Failure(description: "cannot create \(temporary): errno \(errno)") }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { buffer in
                write(fd, buffer.baseAddress.map { $0 + written }, bytes.count - written)
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                close(fd)
                throw Failure(description: "cannot write \(temporary): errno \(errno)")
            }
            written += n
        }
        guard fsync(fd) == 0 else {
            close(fd)
            throw Failure(description: "cannot sync \(temporary): errno \(errno)")
        }
        close(fd)
        guard rename(temporary, path) == 0 else { throw Failure(description: "cannot rename \(temporary) to \(path): errno \(errno)") }
        renamed = true
        // The rename itself reaches the disk with the folder.
        let folder = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folder >= 0 {
            _ = fsync(folder)
            close(folder)
        }
    }
}
