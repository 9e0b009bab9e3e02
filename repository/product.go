package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/payd/payd/domain"
)

// productRow is a row of products. stock NULL is unlimited.
type productRow struct {
	SKU            string        `gorm:"column:sku"`
	Name           string        `gorm:"column:name"`
	UnitPriceMinor int64         `gorm:"column:unit_price_minor"`
	Currency       string        `gorm:"column:currency"`
	Stock          sql.NullInt64 `gorm:"column:stock"`
	Active         bool          `gorm:"column:active"`
	CreatedAt      utcTime       `gorm:"column:created_at"`
	UpdatedAt      utcTime       `gorm:"column:updated_at"`
}

// TableName tells GORM the table.
func (productRow) TableName() string { return "products" }

func productFromDomain(p domain.Product) (productRow, error) {
	price, err := toMinor(p.UnitPrice, p.Currency, "unit_price")
	if err != nil {
		return productRow{}, err
	}
	row := productRow{SKU: p.SKU, Name: p.Name, UnitPriceMinor: price, Currency: string(p.Currency), Active: p.Active,
		CreatedAt: ts(p.CreatedAt), UpdatedAt: ts(p.UpdatedAt)}
	if p.Stock != nil {
		row.Stock = sql.NullInt64{Int64: *p.Stock, Valid: true}
	}
	return row, nil
}

func (r productRow) toDomain() domain.Product {
	cur := domain.Currency(r.Currency)
	p := domain.Product{SKU: r.SKU, Name: r.Name, UnitPrice: domain.FromMinorUnits(r.UnitPriceMinor, cur), Currency: cur,
		Active: r.Active, CreatedAt: r.CreatedAt.time(), UpdatedAt: r.UpdatedAt.time()}
	if r.Stock.Valid {
		n := r.Stock.Int64
		p.Stock = &n
	}
	return p
}

// ProductStore keeps the merchant's catalogue
// (docs/adr/0058-the-merchant-key-and-the-catalogue.md).
type ProductStore struct{ db *DB }

// NewProductStore returns a ProductStore on db.
func NewProductStore(db *DB) *ProductStore { return &ProductStore{db: db} }

// Create stores a new product; a SKU already stored is domain.ErrSKUTaken.
func (s *ProductStore) Create(ctx context.Context, p domain.Product) (domain.Product, error) {
	row, err := productFromDomain(p)
	if err != nil {
		return domain.Product{}, fmt.Errorf("create product %s: %w", p.SKU, err)
	}
	if err := s.db.create(ctx, &row); err != nil {
		if isUniqueViolation(err) { // the primary key is the SKU's only unique index
			return domain.Product{}, fmt.Errorf("create product %s: %w", p.SKU, domain.ErrSKUTaken)
		}
		return domain.Product{}, fmt.Errorf("create product %s: %w", p.SKU, err)
	}
	return row.toDomain(), nil
}

// FindBySKU returns one product, active or not, or domain.ErrProductNotFound.
func (s *ProductStore) FindBySKU(ctx context.Context, sku string) (domain.Product, error) {
	var row productRow
	if err := s.db.conn(ctx).Where("sku = ?", sku).Take(&row).Error; err != nil {
		return domain.Product{}, fmt.Errorf("find product %s: %w", sku, notFound(err, domain.ErrProductNotFound))
	}
	return row.toDomain(), nil
}

// ListActive returns the active products by SKU: at most limit of them,
// those after SKU after ("": from the first).
func (s *ProductStore) ListActive(ctx context.Context, after string, limit int) ([]domain.Product, error) {
	return s.list(ctx, true, after, limit)
}

// ListAll is ListActive with the inactive products too: the operators'
// view of the catalogue.
func (s *ProductStore) ListAll(ctx context.Context, after string, limit int) ([]domain.Product, error) {
	return s.list(ctx, false, after, limit)
}

// list returns the products by SKU, only the active ones when activeOnly:
// at most limit of them, those after SKU after ("": from the first).
func (s *ProductStore) list(ctx context.Context, activeOnly bool, after string, limit int) ([]domain.Product, error) {
	var rows []productRow
	q := s.db.conn(ctx)
	if activeOnly {
		q = q.Where("active = ?", true)
	}
	if after != "" {
		q = q.Where("sku > ?", after)
	}
	if err := q.Order("sku").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list products: %w", err)
	}
	out := make([]domain.Product, len(rows))
	for i, r := range rows {
		out[i] = r.toDomain()
	}
	return out, nil
}

// updateProduct is Update's: what a merchant may change, on a row still
// as it was read (two updates at once cannot silently undo each other).
const updateProduct = `UPDATE products SET name = ?, unit_price_minor = ?, active = ?, updated_at = ?
	WHERE sku = ? AND updated_at = ? AND name = ? AND unit_price_minor = ? AND active = ?`

// Update reads product sku, changes it with change and writes the result
// over the row as read; when another write came between, it reads again
// and changes that. An error of change is returned as it is.
func (s *ProductStore) Update(ctx context.Context, sku string, change func(domain.Product) (domain.Product, error)) (domain.Product, error) {
	for range 5 {
		read, err := s.FindBySKU(ctx, sku)
		if err != nil {
			return domain.Product{}, err
		}
		p, err := change(read)
		if err != nil {
			return domain.Product{}, err
		}
		was, err := productFromDomain(read)
		if err != nil {
			return domain.Product{}, err
		}
		row, err := productFromDomain(p)
		if err != nil {
			return domain.Product{}, fmt.Errorf("update product %s: %w", sku, err)
		}
		ok, err := s.db.guarded(ctx, act{"update product", sku}, updateProduct, row.Name, row.UnitPriceMinor, row.Active, row.UpdatedAt,
			sku, was.UpdatedAt, was.Name, was.UnitPriceMinor, was.Active)
		if err != nil || ok {
			return p, err
		}
	}
	return domain.Product{}, fmt.Errorf("update product %s: changed by others at the same time; try again", sku)
}

// adjustStock is AdjustStock's guarded statement: the stock moves by the
// adjustment only if it stays from 0 to domain.MaxStock. An unlimited
// stock (NULL) matches nothing: NULL + n is NULL, never >= 0.
var adjustStock = `UPDATE products SET stock = stock + ?, updated_at = ?
	WHERE sku = ? AND stock + ? >= 0 AND stock + ? <= ` + strconv.FormatInt(domain.MaxStock, 10)

// AdjustStock adds adjust (negative: takes) to product sku's stock, in
// one guarded statement judged by its matched rows, so concurrent
// adjustments never take the stock below 0 (ADR 0058). The product is
// read back in the same transaction. When the guard does not hold, the
// row tells why: domain.ErrProductNotFound, domain.ErrStockUnlimited,
// domain.ErrInsufficientStock, or an adjustment beyond domain.MaxStock (a
// *domain.ValidationError naming adjust).
func (s *ProductStore) AdjustStock(ctx context.Context, sku string, adjust int64, now time.Time) (domain.Product, error) {
	for range 5 {
		var p domain.Product
		var why error
		err := s.db.inTx(ctx, func(ctx context.Context) error {
			ok, err := s.db.guarded(ctx, act{"adjust stock of", sku}, adjustStock, adjust, ts(now), sku, adjust, adjust)
			if err != nil {
				return err
			}
			if p, err = s.FindBySKU(ctx, sku); err != nil || ok {
				return err
			}
			why = whyNotAdjusted(p, adjust)
			return nil
		})
		switch {
		case err != nil:
			return domain.Product{}, err
		case why == nil:
			return p, nil
		case !errors.Is(why, errFitsNow):
			return domain.Product{}, fmt.Errorf("adjust stock of %s: %w", sku, why)
		}
		// Another adjustment changed the stock between the guard and the
		// read: the guard is asked again.
	}
	return domain.Product{}, fmt.Errorf("adjust stock of %s: changed by others at the same time; try again", sku)
}

// errFitsNow is a stock read after its guard did not hold that would
// take the adjustment: it changed in between.
var errFitsNow = errors.New("the stock changed since the guard")

// whyNotAdjusted is why adjust could not be made to p's stock, as read
// after the guard did not hold.
func whyNotAdjusted(p domain.Product, adjust int64) error {
	switch {
	case p.Stock == nil:
		return domain.ErrStockUnlimited
	case *p.Stock+adjust < 0:
		return domain.ErrInsufficientStock
	case *p.Stock+adjust > domain.MaxStock:
		return &domain.ValidationError{Field: "adjust", Reason: fmt.Sprintf("the stock (%d) may not exceed %d", *p.Stock, domain.MaxStock)}
	}
	return errFitsNow
}

// FindSKUs returns the products of skus, active or not, by SKU, in one
// query; a SKU no product has is missing from the map.
func (s *ProductStore) FindSKUs(ctx context.Context, skus []string) (map[string]domain.Product, error) {
	var rows []productRow
	if err := s.db.conn(ctx).Where("sku IN ?", skus).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("find products: %w", err)
	}
	out := make(map[string]domain.Product, len(rows))
	for _, r := range rows {
		out[r.SKU] = r.toDomain()
	}
	return out, nil
}
