#!/usr/bin/env bash
# The layers and the only directions their includes may point:
#   ir -> bytecode, support          (the compiler)
#   vm -> backend, bytecode, support (the interpreter)
#   backend -> bytecode, support     (OpenCL)
#   bytecode -> support              (ISA, file format, validator, targets)
# Checks public headers (include/stowage/AREA) and sources (src/AREA) alike; prints
# every include that points up or sideways and fails if there is one.
set -u
root=${1:?usage: layering_test.sh SOURCE_DIR}
declare -A allowed=(
  [support]="support"
  [bytecode]="bytecode support"
  [backend]="backend bytecode support"
  [vm]="vm backend bytecode support"
  [ir]="ir bytecode support"
)
bad=0
for area in "${!allowed[@]}"; do
  for dir in "$root/include/stowage/$area" "$root/src/$area"; do
    [ -d "$dir" ] || continue
    while IFS= read -r hit; do
      file=${hit%%:*}
      used=$(sed -E 's#.*"stowage/([a-z_]+)/.*#\1#' <<<"$hit")
      case " ${allowed[$area]} " in
        *" $used "*) ;;
        *) echo "${file#$root/}: $area includes stowage/$used (allowed: ${allowed[$area]})"; bad=1 ;;
      esac
    done < <(grep -rnE '#include +"stowage/[a-z_]+/' "$dir" --include='*.h' --include='*.cc' | grep -v 'stowage/opencl/')
  done
done
[ "$bad" = 0 ] && echo "layering: every include points down"
exit $bad
