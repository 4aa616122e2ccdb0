# Throughput and scaling efficiency vs GPUs from the data file contrib/plot/scale.sh writes.
#   gnuplot -e "datafile='r.dat'; prefix='r'; nseries=2; charttitle='DLRM'" contrib/plot/scale.gp
# Data: one block per series (index i), first line its title, then columns
#   1 gpus  2 samples/s  3 ideal samples/s (linear from the smallest GPU count)  4 efficiency
# Writes prefix-throughput.png and prefix-efficiency.png.

if (!exists("datafile")) datafile = 'scale.dat'
if (!exists("prefix")) prefix = 'scale'
if (!exists("nseries")) nseries = 1
if (!exists("charttitle")) charttitle = 'Scaling'

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900,600 noenhanced font "sans,11"
} else {
    set terminal png size 900,600 noenhanced
}
set key top left box opaque
set grid xtics ytics mxtics mytics
set xlabel "GPUs"
# GPU counts are usually powers of two: a log2 axis puts 1, 2, 4, 8 ... evenly apart.
set logscale x 2
set format x "%g"
set offsets graph 0.05, graph 0.05, 0, 0
set style data linespoints

set output prefix . '-throughput.png'
set title charttitle . ": throughput"
set ylabel "samples/s"
set logscale y 10
set format y "%.0s%c"
plot for [i=0:nseries-1] datafile index i using 1:2 with linespoints lw 2 pt 7 ps 1.2 lc i+1 \
         title columnheader(1), \
     for [i=0:nseries-1] datafile index i using 1:3 with lines dt 2 lw 1 lc i+1 \
         title (i == 0 ? "ideal: linear from the smallest GPU count (dashed)" : "")
unset output

set output prefix . '-efficiency.png'
set title charttitle . ": scaling efficiency (per-GPU throughput / that at the smallest GPU count)"
set ylabel "efficiency"
unset logscale y
set format y "%.2f"
set yrange [0:1.15<*]
set key bottom left
plot for [i=0:nseries-1] datafile index i using 1:4 with linespoints lw 2 pt 7 ps 1.2 lc i+1 \
         title columnheader(1), \
     1 with lines dt 2 lc rgb "black" title "ideal"
unset output
