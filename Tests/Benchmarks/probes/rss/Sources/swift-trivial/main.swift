// c/trivial in Swift: reads a line of stdin, prints a tiny JSON. The Swift runtime and standard library alone.
let line = readLine() ?? ""
print("{\"read\":\(line.utf8.count)}")
