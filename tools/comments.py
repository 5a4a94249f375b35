#!/usr/bin/env python3
"""comments.py -- how long the comments' sentences are, and where a
parenthesis opens inside another.

    tools/comments.py [FILE...]        (default: src/ and include/)

A sentence ends at '.', '!' or '?' followed by a space and a capital, a
digit, a quote or a parenthesis.  Sentences of fewer than 3 words (labels,
table cells) are not counted.  Prints the count, the median and the 90th
percentile of words per sentence, and each comment with a parenthesis
inside a parenthesis.  Lines of code examples and table rows are not
prose and are left out (see comments()).
"""
import glob, re, statistics, sys

def comments(text):
    """Each comment's prose: lines of code examples (indented 4 or more
    past the comment's margin, with a call, ending in ; { } or a
    parenthesis) and table rows (two or more '|') are left out."""
    for c in re.findall(r'/\*.*?\*/|//[^\n]*', text, re.S):
        lines = []
        for line in c.split('\n'):
            line = re.sub(r'^\s*(/\*+|\*+/?|//)', '', line).replace('*/', '')
            code = (re.match(r'^ {4,}\S', line) and re.search(r'\w\(', line) and
                    re.search(r'[;{})]\s*$', line))
            if code or line.count('|') >= 2:
                continue
            lines.append(line)
        c = re.sub(r'\s+', ' ', ' '.join(lines)).strip()
        if c:
            yield c

def main():
    files = sys.argv[1:] or sorted(glob.glob('src/**/*.[ch]', recursive=True) +
                                   glob.glob('include/*.h'))
    words, nested = [], []
    for f in files:
        for c in comments(open(f).read()):
            depth, start = 0, 0
            for i, ch in enumerate(c):
                if ch == '(':
                    depth += 1
                    start = i if depth == 1 else start
                    if depth == 2:
                        nested.append((f, c[start:start + 120]))
                        break
                elif ch == ')':
                    depth = max(0, depth - 1)
            for s in re.split(r'(?<=[.!?])\s+(?=[A-Z0-9`"(])', c):
                n = len(s.split())
                if n >= 3:
                    words.append(n)
    words.sort()
    print('comments.py: %d files, %d sentences, median %g words, 90th percentile %d' %
          (len(files), len(words), statistics.median(words), words[int(0.9 * len(words))]))
    for f, c in nested:
        print('nested parentheses: %s: %s' % (f, c))

main()
