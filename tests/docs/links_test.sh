#!/usr/bin/env bash
# Fails when a relative link in README.md or docs/**/*.md does not resolve.
#
# For every Markdown link [text](target) and reference definition [label]: target outside
# code (fenced blocks and `inline code` are skipped) whose target is not a URL (http:,
# https:, mailto:, ...):
#   - the path part must name a file or directory that exists, relative to the linking file
#     (a target starting with / is taken relative to the repository root, as GitHub does);
#   - the #anchor part, in the same file (#x) or in a Markdown target (file.md#x), must be the
#     GitHub slug of one of that file's headings: lowercased, every character other than a
#     letter, digit, space, '-' or '_' dropped, spaces turned into '-', and "-1", "-2", ...
#     added to the second, third, ... heading with the same slug. Into other files only
#     GitHub's line anchors (#L12, #L12-L20) are allowed, within the file's length.
# Each broken link is printed as FILE:LINE: [text](target): why.
#
# Usage: links_test.sh [REPOSITORY_ROOT]
# Under `bazel test` the root is found from the runfiles: README.md there is a symlink to the
# source file, and its real path's directory is the repository. The check must read the
# repository itself, not the runfiles, because links may name any file of it (source files,
# BUILD files), which are not inputs of this test.
set -uo pipefail
export LC_ALL=C.UTF-8

if (($# >= 1)); then
  root=$(cd "$1" && pwd -P) || exit 2
else
  readme="${TEST_SRCDIR:?not under bazel test: pass the repository root}/${TEST_WORKSPACE}/README.md"
  [[ -e $readme ]] || { echo "links_test: $readme is missing from the runfiles" >&2; exit 2; }
  root=$(dirname "$(readlink -f "$readme")")
fi
[[ -f $root/README.md ]] || { echo "links_test: $root has no README.md" >&2; exit 2; }

# slug TEXT: GitHub's anchor for a heading TEXT (into $REPLY).
slug() {
  local s=${1,,}
  s=${s//[^[:alnum:] _-]/}
  REPLY=${s// /-}
}

# strip_code LINE: LINE with the brackets and parentheses inside its `code spans` turned into
# '_', so that no link is found in code but a link's text may be code (into $REPLY).
strip_code() {
  local s=$1 out=""
  while [[ $s =~ ^([^\`]*)(\`+)(.*)$ ]]; do
    local before=${BASH_REMATCH[1]} ticks=${BASH_REMATCH[2]} rest=${BASH_REMATCH[3]}
    out+=$before
    if [[ $rest == *"$ticks"* ]]; then
      local code=${rest%%"$ticks"*}
      code=${code//[\[\]\(\)]/_}
      out+=$ticks$code$ticks
      s=${rest#*"$ticks"}      # a code span: kept, without brackets, up to the same backticks
    else
      out+=$ticks              # an unmatched run is literal text
      s=$rest
    fi
  done
  REPLY=$out$s
}

declare -A anchors=()   # "<absolute file>#<slug>" -> 1, for every file whose headings are read
declare -A scanned=()   # "<absolute file>" -> 1

# read_headings FILE: records the slugs of FILE's headings (outside fenced code).
read_headings() {
  local file=$1 line fence="" text
  [[ -n ${scanned[$file]+x} ]] && return
  scanned[$file]=1
  declare -A seen=()
  while IFS= read -r line || [[ -n $line ]]; do
    if [[ $line =~ ^\ {0,3}(\`\`\`+|~~~+) ]]; then
      local marker=${BASH_REMATCH[1]:0:3}
      if [[ -z $fence ]]; then fence=$marker; elif [[ $fence == "$marker" ]]; then fence=""; fi
      continue
    fi
    [[ -n $fence ]] && continue
    if [[ $line =~ ^\ {0,3}#{1,6}[[:space:]]+(.*)$ ]]; then
      text=${BASH_REMATCH[1]}
      text=$(sed -E 's/[[:space:]]+#+[[:space:]]*$//; s/[[:space:]]+$//' <<< "$text")
      slug "$text"
      local s=$REPLY
      if [[ -n ${seen[$s]+x} ]]; then
        seen[$s]=$((seen[$s] + 1))
        s="$s-${seen[$s]}"
      else
        seen[$s]=0
      fi
      anchors["$file#$s"]=1
    fi
  done < "$file"
}

failures=0
report() {  # FILE LINE LINK WHY
  echo "${1#"$root"/}:$2: $3: $4"
  failures=$((failures + 1))
}

# check_target FILE LINE LINK TARGET
check_target() {
  local file=$1 lineno=$2 link=$3 target=$4 path anchor dest
  case $target in
    http://* | https://* | mailto:* | ftp://* | "") return ;;
  esac
  # Any other scheme (e.g. tel:) is not a file either.
  [[ $target =~ ^[A-Za-z][A-Za-z0-9+.-]*: && ! $target =~ ^[A-Za-z]:/ ]] && return
  path=${target%%#*}
  anchor=""
  [[ $target == *"#"* ]] && anchor=${target#*#}
  if [[ -z $path ]]; then
    dest=$file
  elif [[ $path == /* ]]; then
    dest=$root$path
  else
    dest=$(dirname "$file")/$path
  fi
  dest=$(realpath -m -- "$dest")
  if [[ ! -e $dest ]]; then
    report "$file" "$lineno" "$link" "no such file: ${dest#"$root"/}"
    return
  fi
  if [[ -n $anchor ]]; then
    if [[ ! -f $dest || $dest != *.md ]]; then
      # GitHub's line anchors (#L12, #L12-L20) are the only anchors of other files.
      if [[ -f $dest && $anchor =~ ^L([0-9]+)(-L([0-9]+))?$ ]]; then
        local last=${BASH_REMATCH[3]:-${BASH_REMATCH[1]}} lines
        lines=$(wc -l < "$dest")
        ((last <= lines + 1)) ||
          report "$file" "$lineno" "$link" "${dest#"$root"/} has only $lines lines"
      else
        report "$file" "$lineno" "$link" "an #anchor into a file that is not Markdown"
      fi
      return
    fi
    dest=$(readlink -f "$dest")
    read_headings "$dest"
    [[ -n ${anchors["$dest#$anchor"]+x} ]] ||
      report "$file" "$lineno" "$link" "no heading of ${dest#"$root"/} has the anchor #$anchor"
  fi
}

# check_file FILE: checks every link of FILE.
check_file() {
  local file=$1 line lineno=0 fence="" rest
  while IFS= read -r line || [[ -n $line ]]; do
    lineno=$((lineno + 1))
    if [[ $line =~ ^\ {0,3}(\`\`\`+|~~~+) ]]; then
      local marker=${BASH_REMATCH[1]:0:3}
      if [[ -z $fence ]]; then fence=$marker; elif [[ $fence == "$marker" ]]; then fence=""; fi
      continue
    fi
    [[ -n $fence ]] && continue
    strip_code "$line"
    rest=$REPLY
    # Reference definitions: [label]: target
    if [[ $rest =~ ^\ {0,3}\[[^]]+\]:[[:space:]]*\<?([^[:space:]\>]+) ]]; then
      check_target "$file" "$lineno" "${BASH_REMATCH[0]}" "${BASH_REMATCH[1]}"
      continue
    fi
    # Inline links and images: [text](target) or [text](target "title")
    local re='\[([^]]*)\]\(<?([^)[:space:]>]*)>?([[:space:]]+"[^"]*")?\)'
    local whole target
    while [[ $rest =~ $re ]]; do
      whole=${BASH_REMATCH[0]} target=${BASH_REMATCH[2]}
      rest=${rest#*"$whole"}
      check_target "$file" "$lineno" "$whole" "$target"
    done
  done < "$file"
}

files=("$root/README.md")
while IFS= read -r -d '' f; do files+=("$f"); done \
  < <(find "$root/docs" -name '*.md' -type f -print0 2>/dev/null | sort -z)

for f in "${files[@]}"; do
  read_headings "$(readlink -f "$f")"
  check_file "$(readlink -f "$f")"
done

if ((failures > 0)); then
  echo "links_test: $failures broken link(s) in ${#files[@]} files"
  exit 1
fi
echo "links_test: every relative link of ${#files[@]} files resolves"
